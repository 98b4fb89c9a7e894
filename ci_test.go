package main

import (
	"bufio"
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// The machine CI runs on brings Go, gcc, git and Node.js 20 from
// nodesource with npm built in (docs/development.md#ci); .ci/run installs
// the rest from Debian.
var freshMachineHas = []string{"gcc", "git", "nodejs"}

// ciRun runs .ci/run with args under PATH path and returns its standard
// output, failing the test unless it exits 0.
func ciRun(t *testing.T, path string, args ...string) string {
	t.Helper()
	cmd := exec.Command("/bin/bash", append([]string{".ci/run"}, args...)...)
	cmd.Env = append(os.Environ(), "PATH="+path)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf(".ci/run %s: %v: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out)
}

// pathOf makes a folder for PATH holding links to the commands named (found
// on the test's PATH) and scripts (name to text), and returns it.
func pathOf(t *testing.T, commands []string, scripts map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for _, name := range commands {
		p, err := exec.LookPath(name)
		if err != nil {
			t.Fatalf("%s is not on PATH: %v", name, err)
		}
		if err := os.Symlink(p, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	for name, text := range scripts {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/bash\n"+text), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// ciPackages is what .ci/run's install step would install on a fresh
// machine: every package of its list.
func ciPackages(t *testing.T) []string {
	t.Helper()
	return strings.Fields(ciRun(t, os.Getenv("PATH"), "packages", "--all"))
}

// debianNode reports whether name is Debian's Node.js or npm, which
// conflict with the machine's nodesource nodejs (issue 29).
func debianNode(name string) bool {
	return name == "nodejs" || name == "npm" || strings.HasPrefix(name, "node-") || strings.HasPrefix(name, "libnode")
}

// The install step installs what is missing only, reads the package lists
// first and only then, and never asks for Debian's nodejs or npm; without
// node and npm on the machine it stops with a message naming them.
func TestCIInstallsOnlyWhatIsMissing(t *testing.T) {
	t.Parallel()
	all := ciPackages(t)
	if !slices.Contains(all, "sqlite3") {
		t.Fatalf("got packages %v, want sqlite3 among them (the case below removes its command)", all)
	}
	// apt-get records its arguments, one call a line.
	log := filepath.Join(t.TempDir(), "apt-get.log")
	fakes := map[string]string{"apt-get": `echo "$*" >> ` + log + "\n"}
	for _, name := range []string{"chromium", "systemd-analyze", "node", "npm"} {
		fakes[name] = ""
	}
	base := []string{"bash", "dirname", "tr", "echo"}
	for _, tt := range []struct {
		name        string
		withSqlite3 bool
	}{
		{"sqlite3 there", true},
		{"sqlite3 missing", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			os.Remove(log)
			scripts := map[string]string{}
			for k, v := range fakes {
				scripts[k] = v
			}
			if tt.withSqlite3 {
				scripts["sqlite3"] = ""
			}
			path := pathOf(t, base, scripts)
			missing := strings.Fields(ciRun(t, path, "packages"))
			if got := slices.Contains(missing, "sqlite3"); got == tt.withSqlite3 {
				t.Fatalf("got sqlite3 missing %v with its command there %v, want the opposite", got, tt.withSqlite3)
			}
			for _, p := range missing {
				if !slices.Contains(all, p) {
					t.Errorf("got %s missing, which is not in the full list %v", p, all)
				}
			}
			ciRun(t, path, "install")
			calls, _ := os.ReadFile(log)
			lines := strings.Split(strings.TrimSpace(string(calls)), "\n")
			if len(missing) == 0 {
				if len(calls) != 0 {
					t.Fatalf("got apt-get calls %q with nothing missing, want none", calls)
				}
				return
			}
			if len(lines) != 2 || !strings.HasPrefix(lines[0], "update") || !strings.HasPrefix(lines[1], "install ") {
				t.Fatalf("got apt-get calls %q, want update, then install", calls)
			}
			var installed []string
			for _, f := range strings.Fields(strings.TrimPrefix(lines[1], "install ")) {
				if !strings.HasPrefix(f, "-") {
					installed = append(installed, f)
				}
			}
			if !slices.Equal(installed, missing) {
				t.Fatalf("got apt-get install %v, want the missing packages %v", installed, missing)
			}
		})
	}
	t.Run("no node", func(t *testing.T) {
		scripts := map[string]string{"apt-get": fakes["apt-get"], "sqlite3": "", "chromium": "", "systemd-analyze": ""}
		cmd := exec.Command("/bin/bash", ".ci/run", "install")
		cmd.Env = append(os.Environ(), "PATH="+pathOf(t, base, scripts))
		out, err := cmd.CombinedOutput()
		if err == nil || !strings.Contains(string(out), "Node.js 20 with npm") {
			t.Fatalf("got %v: %s without node and npm, want a failure naming Node.js 20 with npm", err, out)
		}
		if calls, _ := os.ReadFile(log); strings.Contains(string(calls), "nodejs") || strings.Contains(string(calls), "npm") {
			t.Fatalf("got apt-get calls %q, want no nodejs or npm", calls)
		}
	})
}

// On a fresh machine (Debian's required packages and what the machine
// brings: gcc, git and nodesource's nodejs), `apt-get install` of every
// package .ci/run may install resolves: simulated with apt-get -s against
// a dpkg status of that machine, built from this one's. The list holds no
// Debian nodejs or npm, and the simulation does catch the conflict the
// step hit before (nodejs : Conflicts: npm).
func TestCIInstallResolvesOnAFreshMachine(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("apt-get"); err != nil {
		if os.Getenv("CI") != "" {
			t.Fatal("apt-get is missing: CI runs on Debian")
		}
		t.Skip("apt-get is missing: not a Debian machine")
	}
	pkgs := ciPackages(t)
	for _, p := range pkgs {
		if debianNode(p) {
			t.Fatalf("got %s in .ci/run's packages %v, want no Debian Node.js or npm", p, pkgs)
		}
	}
	status := filepath.Join(t.TempDir(), "status")
	nodesource := freshStatus(t, "/var/lib/dpkg/status", status)
	simulate := func(pkgs []string) (string, error) {
		cmd := exec.Command("apt-get", append([]string{"-s", "-o", "Dir::State::status=" + status, "install", "-y"}, pkgs...)...)
		cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive", "LC_ALL=C")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	// Without package lists apt-get knows no package (the install step
	// reads them first); with them, an unknown name is a mistake.
	if lists, _ := filepath.Glob("/var/lib/apt/lists/*_Packages*"); len(lists) == 0 {
		t.Skip("no package lists in /var/lib/apt/lists (apt-get update)")
	}
	out, err := simulate(pkgs)
	if err != nil || strings.Contains(out, "Conflicts") || strings.Contains(out, "broken packages") || strings.Contains(out, "unmet dependencies") {
		t.Fatalf("apt-get -s install -y %s on a fresh machine: %v:\n%s", strings.Join(pkgs, " "), err, out)
	}
	n := 0
	for _, line := range strings.Split(out, "\n") {
		if f := strings.Fields(line); len(f) > 1 && f[0] == "Inst" {
			n++
			if debianNode(f[1]) {
				t.Errorf("got %q in the simulated install, want no Debian Node.js or npm", line)
			}
		}
	}
	if n == 0 {
		t.Fatalf("got no package installed on a fresh machine, want the CI's and their dependencies:\n%s", out)
	}
	t.Logf("a fresh machine gets %d packages for: %s", n, strings.Join(pkgs, " "))
	if !nodesource {
		return
	}
	// The list of the step before issue 29.
	out, err = simulate(append(slices.Clone(pkgs), "nodejs", "npm"))
	if err == nil || !strings.Contains(out, "Conflicts: npm") {
		t.Fatalf("got %v for the list with Debian's npm, want the conflict with nodesource's nodejs:\n%s", err, out)
	}
}

// freshStatus writes to path the dpkg status of a fresh machine: the
// packages of the one at from that are Essential or required, and
// freshMachineHas, with everything they depend on. It reports whether the
// nodejs there is nodesource's.
func freshStatus(t *testing.T, from, path string) (nodesource bool) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	type pkg struct {
		text   string
		fields map[string]string
	}
	installed := map[string]pkg{}
	provider := map[string]string{}
	for _, stanza := range strings.Split(string(data), "\n\n") {
		fields := map[string]string{}
		var key string
		sc := bufio.NewScanner(strings.NewReader(stanza))
		sc.Buffer(nil, 1<<20)
		for sc.Scan() {
			line := sc.Text()
			if strings.HasPrefix(line, " ") && key != "" {
				fields[key] += line
				continue
			}
			k, v, _ := strings.Cut(line, ":")
			key, fields[k] = k, strings.TrimSpace(v)
		}
		if !strings.HasSuffix(fields["Status"], " installed") {
			continue
		}
		name := fields["Package"]
		installed[name] = pkg{strings.TrimSpace(stanza), fields}
		for _, p := range names(fields["Provides"]) {
			if _, ok := provider[p[0]]; !ok {
				provider[p[0]] = name
			}
		}
	}
	todo := slices.Clone(freshMachineHas)
	for name, p := range installed {
		if p.fields["Essential"] == "yes" || p.fields["Priority"] == "required" {
			todo = append(todo, name)
		}
	}
	keep := map[string]bool{}
	for len(todo) > 0 {
		name := todo[len(todo)-1]
		todo = todo[:len(todo)-1]
		if _, ok := installed[name]; !ok {
			name = provider[name]
		}
		if name == "" || keep[name] {
			continue
		}
		keep[name] = true
		f := installed[name].fields
		// Of each dependency's alternatives, the first one installed here.
		for _, alts := range names(f["Depends"] + ", " + f["Pre-Depends"]) {
			for _, a := range alts {
				if _, ok := installed[a]; ok || provider[a] != "" {
					todo = append(todo, a)
					break
				}
			}
		}
	}
	var out strings.Builder
	for name := range keep {
		out.WriteString(installed[name].text + "\n\n")
	}
	if err := os.WriteFile(path, []byte(out.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return keep["nodejs"] && strings.Contains(installed["nodejs"].fields["Version"], "nodesource")
}

// names parses a dpkg relation field ("a (>= 1) | b, c:any") into its
// alternatives' package names: [[a b] [c]].
func names(field string) [][]string {
	var rel [][]string
	for _, group := range strings.Split(field, ",") {
		var alts []string
		for _, alt := range strings.Split(group, "|") {
			f := strings.Fields(alt)
			if len(f) == 0 {
				continue
			}
			name, _, _ := strings.Cut(f[0], ":")
			alts = append(alts, name)
		}
		if len(alts) > 0 {
			rel = append(rel, alts)
		}
	}
	return rel
}
