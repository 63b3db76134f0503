package retry_test

import (
	"fmt"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"unicode"
)

// The Go snippets of README.md and of every guide in docs/ compile when
// pasted into a function of the reader's, as they are written. Each ```go
// block is compiled, and vetted, by the go command as a package of a
// temporary module added to a workspace of every module of this repository
// (so a snippet may import any of them and their dependencies):
//   - a block with a package clause is a whole file, compiled as it is;
//   - a block of declarations only (imports, types, funcs) is compiled at
//     package level;
//   - any other block is the body of func(ctx context.Context) error, with
//     its import lines moved above it.
//
// Packages a block without import lines uses are imported for it when
// they are among readmeImports; a block with import lines must import
// every package it uses, as a reader copies it. The names a snippet takes from the
// reader's own code (callTheService, User, client.GetUser, id, url, addr,
// ErrInvalid) are declared by readmePlaceholders; anything else a snippet
// uses must be declared or imported in the snippet.
func TestREADMESnippetsCompile(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the go command")
	}
	docs := markdownFiles(t)
	work := t.TempDir()
	if err := writeWorkspace(work); err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		blocks := goBlocks(string(text))
		if len(blocks) == 0 && doc == "README.md" {
			t.Fatal("no ```go blocks in README.md")
		}
		for _, b := range blocks {
			name := strings.NewReplacer("/", "_", ".", "_").Replace(doc) + fmt.Sprintf("_line%d", b.line)
			t.Run(name, func(t *testing.T) {
				dir := filepath.Join(work, name)
				if err := os.MkdirAll(dir, 0o755); err != nil {
					t.Fatal(err)
				}
				src := snippetPackage(b.code)
				src["go.mod"] = "module readmesnippet\n\ngo 1.26.0\n"
				for file, text := range src {
					if err := os.WriteFile(filepath.Join(dir, file), []byte(text), 0o644); err != nil {
						t.Fatal(err)
					}
				}
				goWork := filepath.Join(work, "go.work."+name)
				if err := os.WriteFile(goWork,
					[]byte(strings.Replace(workFile, "use (\n", "use (\n\t./"+name+"\n", 1)), 0o644); err != nil {
					t.Fatal(err)
				}
				cmd := exec.Command("go", "vet", ".")
				cmd.Dir = dir
				cmd.Env = append(os.Environ(), "GOWORK="+goWork)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Errorf("%s line %d: the snippet does not compile or vet (%v):\n%s\nsnippet as compiled:\n%s",
						doc, b.line, err, out, src["snippet.go"])
				}
			})
		}
	}
}

// markdownFiles returns README.md and every guide in docs/, as paths
// relative to the repository's root.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	guides, err := filepath.Glob(filepath.Join("docs", "*.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(guides) == 0 {
		t.Fatal("no guides in docs/")
	}
	return append([]string{"README.md"}, guides...)
}

// workFile is the go.work of the snippets' workspace, written by
// writeWorkspace: every module of this repository, by absolute path.
var workFile string

// writeWorkspace prepares workFile from every module of the repository.
func writeWorkspace(work string) error {
	root, err := filepath.Abs(".")
	if err != nil {
		return err
	}
	dirs, err := moduleDirs(root)
	if err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("go 1.26.0\n\nuse (\n")
	for _, dir := range dirs {
		fmt.Fprintf(&b, "\t%s\n", dir)
	}
	b.WriteString(")\n")
	workFile = b.String()
	if sum, err := os.ReadFile("go.work.sum"); err == nil {
		return os.WriteFile(filepath.Join(work, "go.work.sum"), sum, 0o644)
	}
	return nil
}

// moduleDirs returns the directory of every go.mod below root, outside
// hidden and testdata directories.
func moduleDirs(root string) ([]string, error) {
	var dirs []string
	err := filepath.WalkDir(root, func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && path != root && (strings.HasPrefix(d.Name(), ".") || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if !d.IsDir() && d.Name() == "go.mod" {
			dirs = append(dirs, filepath.Dir(path))
		}
		return nil
	})
	return dirs, err
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
	addr       = "127.0.0.1:6379"
)

type User struct{ Name string }

type userClient struct{}

func (userClient) GetUser(ctx context.Context, id string) (User, error) { return User{Name: id}, nil }

func callTheService(ctx context.Context) error { return nil }

func main() {}
`

var importLine = regexp.MustCompile(`(?m)^import\s+(?:\(([^)]*)\)|("[^"]+"))[ \t]*\n`)

// snippetPackage returns the files of the package that compiles code.
func snippetPackage(code string) map[string]string {
	body := importLine.ReplaceAllString(code, "")
	fset := token.NewFileSet()
	if _, err := parser.ParseFile(fset, "", code, parser.PackageClauseOnly); err == nil {
		return map[string]string{"snippet.go": code}
	}
	// Import lines name their package when it differs from the path's last
	// element (redis "cloud.google.com/go/redis/apiv1"): keep the names.
	var imports []string
	for _, m := range importLine.FindAllStringSubmatch(code, -1) {
		for _, line := range strings.Split(m[1]+"\n"+m[2], "\n") {
			if line = strings.TrimSpace(line); line != "" {
				imports = append(imports, line)
			}
		}
	}
	have := map[string]bool{}
	for _, line := range imports {
		have[importedPath(line)] = true
	}
	if len(imports) == 0 {
		// Only a block without import lines gets these: one with import
		// lines must import everything it uses, as a reader copies it.
		for name, p := range readmeImports {
			if regexp.MustCompile(`\b` + name + `\.`).MatchString(body) {
				imports = append(imports, strconv.Quote(p))
				have[p] = true
			}
		}
	}
	if !have["context"] {
		imports = append(imports, `"context"`)
	}
	var b strings.Builder
	b.WriteString("package main\n\nimport (\n")
	for _, line := range imports {
		fmt.Fprintf(&b, "\t%s\n", line)
	}
	b.WriteString(")\n\nvar _ context.Context\n\n")
	if _, err := parser.ParseFile(fset, "", "package main\n"+body, 0); err == nil {
		b.WriteString(body) // declarations only
	} else {
		b.WriteString("func snippet(ctx context.Context) error {\n" + body + "\treturn nil\n}\n")
	}
	return map[string]string{"snippet.go": b.String(), "placeholders.go": readmePlaceholders}
}

// sub0 unquotes an import path.
func sub0(q string) string { return strings.Trim(q, `"`) }

// importedPath is the path of an import spec such as `redis "x/y"`.
func importedPath(spec string) string {
	f := strings.Fields(spec)
	return sub0(f[len(f)-1])
}

// TestREADMELinksResolve: every relative link of README.md, of the guides
// in docs/ and of ARCHITECTURE.md, CHANGELOG.md and CONTRIBUTING.md names
// a file or directory of the repository, and a link
// to a section of a Markdown file (file.md#section, or #section) names a
// heading of it, by GitHub's anchor rule. Links in code are not links.
func TestREADMELinksResolve(t *testing.T) {
	root, err := filepath.Abs(".")
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, doc := range append(markdownFiles(t), "ARCHITECTURE.md", "CHANGELOG.md", "CONTRIBUTING.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range markdownLinks(string(text)) {
			if strings.Contains(l.target, "://") || strings.HasPrefix(l.target, "mailto:") {
				continue
			}
			checked++
			file, anchor, _ := strings.Cut(l.target, "#")
			path := doc
			if file != "" {
				path = filepath.Join(filepath.Dir(doc), filepath.FromSlash(file))
			}
			abs, err := filepath.Abs(path)
			if err != nil {
				t.Fatal(err)
			}
			if rel, err := filepath.Rel(root, abs); err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
				t.Errorf("%s line %d: link %q leaves the repository", doc, l.line, l.target)
				continue
			}
			if _, err := os.Stat(path); err != nil {
				t.Errorf("%s line %d: link %q: %v", doc, l.line, l.target, err)
				continue
			}
			if anchor == "" {
				continue
			}
			if !strings.HasSuffix(path, ".md") {
				t.Errorf("%s line %d: link %q: a section of a file that is not Markdown", doc, l.line, l.target)
				continue
			}
			target, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if !headingAnchors(string(target))[anchor] {
				t.Errorf("%s line %d: link %q: %s has no heading with that anchor", doc, l.line, l.target, path)
			}
		}
	}
	if checked == 0 {
		t.Fatal("no relative links found: the link parser is broken")
	}
}

type mdLink struct {
	line   int
	target string
}

var (
	mdLinkRE   = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpanRE = regexp.MustCompile("`+[^`]*`+")
)

// markdownLinks returns the inline links and images of a Markdown text,
// outside fenced code blocks and code spans.
func markdownLinks(md string) []mdLink {
	var links []mdLink
	fenced := false
	for i, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
			continue
		}
		if fenced {
			continue
		}
		for _, m := range mdLinkRE.FindAllStringSubmatch(codeSpanRE.ReplaceAllString(line, ""), -1) {
			links = append(links, mdLink{i + 1, m[1]})
		}
	}
	return links
}

// headingAnchors returns the anchors GitHub gives the headings of a
// Markdown text: lower case, spaces as hyphens, other punctuation dropped,
// "-1", "-2", … appended to repeats.
func headingAnchors(md string) map[string]bool {
	anchors := map[string]bool{}
	seen := map[string]int{}
	fenced := false
	for _, line := range strings.Split(md, "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "```") {
			fenced = !fenced
		}
		if fenced || !strings.HasPrefix(line, "#") {
			continue
		}
		title := strings.TrimSpace(strings.TrimLeft(line, "#"))
		var b strings.Builder
		for _, r := range strings.ToLower(title) {
			switch {
			case r == ' ':
				b.WriteRune('-')
			case r == '-' || r == '_' || unicode.IsLetter(r) || unicode.IsDigit(r):
				b.WriteRune(r)
			}
		}
		a := b.String()
		if n := seen[a]; n > 0 {
			seen[a]++
			a = fmt.Sprintf("%s-%d", a, n)
		} else {
			seen[a] = 1
		}
		anchors[a] = true
	}
	return anchors
}

// TestLicenseInEveryModule: every module of the repository carries the
// root's LICENSE, byte for byte, since the zip of a nested module holds
// only the files below its own go.mod.
func TestLicenseInEveryModule(t *testing.T) {
	want, err := os.ReadFile("LICENSE")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(want), "Apache License\n                           Version 2.0, January 2004") {
		t.Fatal("LICENSE is not the Apache License 2.0")
	}
	dirs, err := moduleDirs(".")
	if err != nil {
		t.Fatal(err)
	}
	for _, dir := range dirs {
		got, err := os.ReadFile(filepath.Join(dir, "LICENSE"))
		if err != nil {
			t.Errorf("module %s: %v (copy the root's LICENSE there)", dir, err)
		} else if string(got) != string(want) {
			t.Errorf("module %s: LICENSE differs from the root's", dir)
		}
	}
}

// TestNoConflictMarkers: no Markdown file the links test reads keeps the
// markers of an unresolved merge (a merge once committed ARCHITECTURE.md
// with two of them, each side a version of the fleet's section).
func TestNoConflictMarkers(t *testing.T) {
	for _, doc := range append(markdownFiles(t), "ARCHITECTURE.md", "CHANGELOG.md", "CONTRIBUTING.md") {
		text, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		for i, line := range strings.Split(string(text), "\n") {
			if strings.HasPrefix(line, "<<<<<<< ") || strings.HasPrefix(line, ">>>>>>> ") || line == "=======" {
				t.Errorf("%s line %d: merge conflict marker %q", doc, i+1, line)
			}
		}
	}
}
