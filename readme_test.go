package retry_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// The Go snippets of README.md compile when pasted into a function of the
// reader's, as they are written. Each ```go block is compiled, and vetted,
// by the go command in a temporary package inside the module its imports
// point to (the root module unless it imports another of this repository's
// modules):
//   - a block with a package clause is a whole file, compiled as it is;
//   - a block of declarations only (imports, types, funcs) is compiled at
//     package level;
//   - any other block is the body of func(ctx context.Context) error, with
//     its import lines moved above it.
//
// Packages a block uses without importing them are imported for it when
// they are among readmeImports. The names a snippet takes from the
// reader's own code (callTheService, User, client.GetUser, id, url,
// ErrInvalid) are declared by readmePlaceholders; anything else a snippet
// uses must be declared in the snippet.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	readme, err := os.ReadFile("README.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := goBlocks(string(readme))
	if len(blocks) == 0 {
		t.Fatal("no ```go blocks in README.md")
	}
	for _, b := range blocks {
		t.Run(fmt.Sprintf("line%d", b.line), func(t *testing.T) {
			modDir, src := snippetPackage(t, b.code)
			dir, err := os.MkdirTemp(modDir, "readme_snippet_")
			if err != nil {
				t.Fatal(err)
			}
			defer os.RemoveAll(dir)
			for name, text := range src {
				if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("go", "vet", "./"+filepath.Base(dir))
			cmd.Dir = modDir
			if out, err := cmd.CombinedOutput(); err != nil {
				t.Errorf("README.md line %d: the snippet does not compile or vet (%v):\n%s\nsnippet as compiled:\n%s",
					b.line, err, out, src["snippet.go"])
			}
		})
	}
}

type goBlock struct {
	line int // of the opening fence, 1-based
	code string
}

// goBlocks returns the ```go fenced blocks of a Markdown text.
func goBlocks(md string) []goBlock {
	var blocks []goBlock
	lines := strings.Split(md, "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```go" {
			continue
		}
		start := i
		var code []string
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			code = append(code, lines[i])
		}
		blocks = append(blocks, goBlock{start + 1, strings.Join(code, "\n") + "\n"})
	}
	return blocks
}

// readmeImports are the packages a snippet may use without importing them,
// by the name it uses.
var readmeImports = map[string]string{
	"context": "context", "errors": "errors", "fmt": "fmt", "io": "io", "log": "log", "slog": "log/slog",
	"http": "net/http", "os": "os", "strings": "strings", "time": "time",
	"retry": "github.com/retrykit/retry", "retryhttp": "github.com/retrykit/retry/retryhttp",
	"sim": "github.com/retrykit/retry/sim",
}

// readmePlaceholders stands for the reader's own code that the snippets
// call.
const readmePlaceholders = `package main

import (
	"context"
	"errors"
)

var (
	ErrInvalid = errors.New("invalid input")
	client     userClient
	id         = "42"
	url        = "http://127.0.0.1:1/"
)

type User struct{ Name string }

type userClient struct{}

func (userClient) GetUser(ctx context.Context, id string) (User, error) { return User{Name: id}, nil }

func callTheService(ctx context.Context) error { return nil }

func main() {}
`

var importLine = regexp.MustCompile(`(?m)^import\s+(?:\(([^)]*)\)|("[^"]+"))[ \t]*\n`)

// snippetPackage returns the module directory to compile code in and the
// files of the package.
func snippetPackage(t *testing.T, code string) (modDir string, files map[string]string) {
	t.Helper()
	var imports []string
	body := importLine.ReplaceAllStringFunc(code, func(m string) string {
		sub := importLine.FindStringSubmatch(m)
		for _, f := range strings.Fields(sub[1] + " " + sub[2]) {
			if strings.HasPrefix(f, `"`) {
				imports = append(imports, strings.Trim(f, `"`))
			}
		}
		return ""
	})
	modDir = "."
	for _, p := range imports {
		if d := moduleDirOf(p); d != "." {
			modDir = d
		}
	}
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "", code, parser.PackageClauseOnly); err == nil {
		return modDir, map[string]string{"snippet.go": code}
	}
	have := map[string]bool{}
	for _, p := range imports {
		have[p] = true
	}
	for name, p := range readmeImports {
		if !have[p] && regexp.MustCompile(`\b`+name+`\.`).MatchString(body) {
			imports = append(imports, p)
			have[p] = true
		}
	}
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	for _, p := range imports {
		fmt.Fprintf(&b, "\t%q\n", p)
	}
	b.WriteString(")\n\n")
	if _, err := parser.ParseFile(fset, "", "package main\n"+body, 0); err == nil {
		b.WriteString(body) // declarations only
	} else {
		b.WriteString("func snippet(ctx context.Context) error {\n" + body + "\treturn nil\n}\n")
		if !have["context"] {
			return modDir, withContext(b.String())
		}
	}
	return modDir, map[string]string{"snippet.go": b.String(), "placeholders.go": readmePlaceholders}
}

func withContext(src string) map[string]string {
	src = strings.Replace(src, "import (\n", "import (\n\t\"context\"\n", 1)
	return map[string]string{"snippet.go": src, "placeholders.go": readmePlaceholders}
}

// moduleDirOf returns the directory (relative to the root) of this
// repository's module that holds import path p, or "." for the root
// module, the standard library and third-party packages.
func moduleDirOf(p string) string {
	rel, ok := strings.CutPrefix(p, "github.com/retrykit/retry/")
	if !ok {
		return "."
	}
	for d := rel; d != "." && d != ""; d = filepath.Dir(d) {
		if _, err := os.Stat(filepath.Join(d, "go.mod")); err == nil {
			return d
		}
	}
	return "."
}
