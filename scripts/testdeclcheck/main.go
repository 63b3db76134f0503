// Command testdeclcheck shows that a reorganisation of test files (renames,
// whole functions moved between files of one package) kept every test as it
// was. It lists every top-level declaration of every *_test.go file under a
// root, keyed by directory, package clause and name, with a SHA-256 of its
// go/printer output (doc comment and inner comments included), and counts
// per package the Test, Example, Benchmark and Fuzz functions and the
// t.Error*, t.Fatal*, b.Error* and b.Fatal* calls.
//
//	go run ./scripts/testdeclcheck . > /tmp/before.txt
//	(rename or move tests)
//	go run ./scripts/testdeclcheck . > /tmp/after.txt
//	go run ./scripts/testdeclcheck -diff /tmp/before.txt /tmp/after.txt
//
// -diff exits 0 and prints one OK line when every declaration other than an
// import is present after, as often, in the same package with the same hash,
// and every package's counts are equal; otherwise it prints each difference
// and exits 1. Directories named testdata or vendor, and hidden ones, are
// skipped. It is a tool for reviews, not part of the test suite.
package main

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"fmt"
	"go/ast"
	"go/parser"
	"go/printer"
	"go/token"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

type counts struct{ Test, Example, Bench, Fuzz, TErr, TFatal, BErr, BFatal, Decls int }

func main() {
	if len(os.Args) == 4 && os.Args[1] == "-diff" {
		os.Exit(diff(os.Args[2], os.Args[3]))
	}
	if len(os.Args) != 2 {
		fmt.Fprintln(os.Stderr, "usage: testdeclcheck ROOT | testdeclcheck -diff BEFORE AFTER")
		os.Exit(2)
	}
	root := os.Args[1]
	var decls []string
	cnt := map[string]*counts{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if n := d.Name(); p != root && (strings.HasPrefix(n, ".") || n == "testdata" || n == "vendor") {
				return filepath.SkipDir
			}
			return nil
		}
		if !strings.HasSuffix(p, "_test.go") {
			return nil
		}
		fset := token.NewFileSet()
		f, err := parser.ParseFile(fset, p, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(p))
		key := rel + " " + f.Name.Name
		c := cnt[key]
		if c == nil {
			c = &counts{}
			cnt[key] = c
		}
		for _, decl := range f.Decls {
			var buf bytes.Buffer
			if err := printer.Fprint(&buf, fset, &printer.CommentedNode{Node: decl, Comments: f.Comments}); err != nil {
				return err
			}
			name := declName(decl)
			decls = append(decls, fmt.Sprintf("%s %s %x", key, name, sha256.Sum256(buf.Bytes())))
			c.Decls++
			if fd, ok := decl.(*ast.FuncDecl); ok && fd.Recv == nil {
				switch {
				case strings.HasPrefix(fd.Name.Name, "Test"):
					c.Test++
				case strings.HasPrefix(fd.Name.Name, "Example"):
					c.Example++
				case strings.HasPrefix(fd.Name.Name, "Benchmark"):
					c.Bench++
				case strings.HasPrefix(fd.Name.Name, "Fuzz"):
					c.Fuzz++
				}
			}
		}
		ast.Inspect(f, func(n ast.Node) bool {
			call, ok := n.(*ast.CallExpr)
			if !ok {
				return true
			}
			sel, ok := call.Fun.(*ast.SelectorExpr)
			if !ok {
				return true
			}
			id, ok := sel.X.(*ast.Ident)
			if !ok {
				return true
			}
			isErr := strings.HasPrefix(sel.Sel.Name, "Error")
			isFatal := strings.HasPrefix(sel.Sel.Name, "Fatal")
			switch {
			case id.Name == "t" && isErr:
				c.TErr++
			case id.Name == "t" && isFatal:
				c.TFatal++
			case id.Name == "b" && isErr:
				c.BErr++
			case id.Name == "b" && isFatal:
				c.BFatal++
			}
			return true
		})
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	sort.Strings(decls)
	w := bufio.NewWriter(os.Stdout)
	defer w.Flush()
	keys := make([]string, 0, len(cnt))
	for k := range cnt {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		c := cnt[k]
		fmt.Fprintf(w, "COUNT %s decls=%d test=%d example=%d bench=%d fuzz=%d t.Error=%d t.Fatal=%d b.Error=%d b.Fatal=%d\n",
			k, c.Decls, c.Test, c.Example, c.Bench, c.Fuzz, c.TErr, c.TFatal, c.BErr, c.BFatal)
	}
	for _, d := range decls {
		fmt.Fprintln(w, "DECL", d)
	}
}

func declName(decl ast.Decl) string {
	switch d := decl.(type) {
	case *ast.FuncDecl:
		if d.Recv != nil && len(d.Recv.List) > 0 {
			var b bytes.Buffer
			printer.Fprint(&b, token.NewFileSet(), d.Recv.List[0].Type)
			return "func(" + b.String() + ")." + d.Name.Name
		}
		return "func." + d.Name.Name
	case *ast.GenDecl:
		var names []string
		for _, s := range d.Specs {
			switch s := s.(type) {
			case *ast.ImportSpec:
				names = append(names, s.Path.Value)
			case *ast.TypeSpec:
				names = append(names, s.Name.Name)
			case *ast.ValueSpec:
				for _, n := range s.Names {
					names = append(names, n.Name)
				}
			}
		}
		return d.Tok.String() + "." + strings.Join(names, ",")
	}
	return "?"
}

// diff compares two outputs: every non-import declaration line of BEFORE
// must be present in AFTER as often (same directory, package, name and hash),
// and COUNT lines must be equal. Import declarations may differ when
// functions move between files.
func diff(a, b string) int {
	read := func(p string) (map[string]int, map[string]string) {
		data, err := os.ReadFile(p)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		decls, cnts := map[string]int{}, map[string]string{}
		for _, l := range strings.Split(strings.TrimSpace(string(data)), "\n") {
			f := strings.Fields(l)
			switch f[0] {
			case "DECL":
				if !strings.HasPrefix(f[3], "import.") {
					decls[strings.Join(f[1:], " ")]++
				}
			case "COUNT":
				cnts[f[1]+" "+f[2]] = strings.Join(f[3:], " ")
			}
		}
		return decls, cnts
	}
	da, ca := read(a)
	db, cb := read(b)
	bad := 0
	for k, n := range da {
		if db[k] != n {
			fmt.Printf("MISSING %s (before %d, after %d)\n", k, n, db[k])
			bad++
		}
	}
	for k, n := range db {
		if da[k] != n {
			fmt.Printf("NEW %s (before %d, after %d)\n", k, da[k], n)
			bad++
		}
	}
	for k, v := range ca {
		if w := cb[k]; !sameCounts(v, w) {
			fmt.Printf("COUNT %s: before %s; after %s\n", k, v, w)
			bad++
		}
	}
	for k := range cb {
		if _, ok := ca[k]; !ok {
			fmt.Printf("COUNT %s: new package\n", k)
			bad++
		}
	}
	if bad == 0 {
		fmt.Printf("OK: %d non-import declarations in %d packages, all present with the same hash; counts unchanged\n", len(da), len(ca))
		return 0
	}
	return 1
}

// sameCounts ignores decls=, which changes by the number of import blocks.
func sameCounts(a, b string) bool {
	strip := func(s string) string {
		f := strings.Fields(s)
		if len(f) > 0 && strings.HasPrefix(f[0], "decls=") {
			f = f[1:]
		}
		return strings.Join(f, " ")
	}
	return strip(a) == strip(b)
}
