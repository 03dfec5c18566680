// Command gen writes gotry's Grafana dashboards as JSON files.
//
// Run it from the dashboards module, usually through go generate:
//
//	cd dashboards && go generate ./...
//
// or directly:
//
//	cd dashboards && go run ./cmd/gen -dir grafana
//
// It overwrites each generated file and leaves other files alone; the
// module's tests fail on a file in the directory that gen does not write.
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/MrVSiK/gotry/dashboards"
)

func main() {
	dir := flag.String("dir", "grafana", "directory to write the dashboard JSON files to")
	flag.Parse()
	if err := run(*dir); err != nil {
		fmt.Fprintln(os.Stderr, "gen:", err)
		os.Exit(1)
	}
}

func run(dir string) error {
	files, err := dashboards.Generate()
	if err != nil {
		return err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	for _, f := range files {
		path := filepath.Join(dir, f.Name)
		if err := os.WriteFile(path, f.Data, 0o644); err != nil {
			return err
		}
		fmt.Println("wrote", path)
	}
	return nil
}
