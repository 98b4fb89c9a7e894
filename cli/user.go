package cli

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// stdin is where `tally user add --password-stdin` reads the password
// (tests replace it).
var stdin io.Reader = os.Stdin

// terminal is where `tally user add --password-prompt` asks for the
// password, with echo off: the controlling terminal on standard input
// (tests give a pseudo-terminal).
var terminal = os.Stdin

// userCommand is `tally user add|reset-password ...`: the operator's
// account commands (docs/accounts.md#the-first-owner). Like `tally backup`
// they ask the running server at QUERY_ADDR with ADMIN_TOKEN, so they work
// the same over SQLite and PostgreSQL, and every account change goes
// through the server's audit.
func userCommand(args []string, getenv func(string) string, stdout, stderr io.Writer) int {
	if len(args) == 0 || (args[0] != "add" && args[0] != "reset-password") {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(stdout, userUsage)
			return 0
		}
		fmt.Fprintln(stderr, "tally user: want add or reset-password\n\n"+userUsage)
		return 2
	}
	env := func(name, def string) string {
		if v := getenv(name); v != "" {
			return v
		}
		return def
	}
	sub := args[0]
	fs := flag.NewFlagSet("tally user "+sub, flag.ContinueOnError)
	queryAddr := fs.String("query-addr", env("QUERY_ADDR", ":8081"), "where the running server's query API listens [QUERY_ADDR]")
	token := fs.String("admin-token", env("ADMIN_TOKEN", ""), "the running server's operator token; prefer the environment variable [ADMIN_TOKEN]")
	baseURL := fs.String("base-url", defaultBaseURL(getenv), "the dashboard's address as people reach it, for the printed link")
	email := fs.String("email", "", "the user's email address")
	var role, workspace *string
	var fromStdin, prompt *bool
	if sub == "add" {
		role = fs.String("role", "viewer", "owner, admin or viewer")
		workspace = fs.String("workspace", "", "the workspace's slug")
		fromStdin = fs.Bool("password-stdin", false, "read the password from the first line of standard input; without it a one-time set-password link is printed")
		prompt = fs.Bool("password-prompt", false, "ask for the password on the terminal, twice, without echoing it")
	}
	fs.Usage = func() { fmt.Fprintln(fs.Output(), userUsage); fs.PrintDefaults() }
	if code, ok := parseFlags(fs, args[1:], stdout, stderr); !ok {
		return code
	}
	if *email == "" || (sub == "add" && *workspace == "") {
		fmt.Fprintf(stderr, "tally user %s: --email is required%s\n", sub, map[bool]string{true: ", and --workspace", false: ""}[sub == "add"])
		return 2
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	base := serverURL(*queryAddr)
	var answer struct {
		Email string `json:"email"`
		Role  string `json:"role"`
		Link  *struct {
			Path      string `json:"path"`
			ExpiresAt string `json:"expires_at"`
		} `json:"password_link"`
		Path      string `json:"path"`
		ExpiresAt string `json:"expires_at"`
	}
	var err error
	if sub == "add" {
		body := map[string]any{"email": *email, "role": *role, "workspace": *workspace}
		if *prompt && *fromStdin {
			fmt.Fprintln(stderr, "tally user add: give --password-prompt or --password-stdin, not both")
			return 2
		}
		if *prompt {
			pw, perr := askPassword(terminal, stderr)
			if perr != nil {
				fmt.Fprintln(stderr, "tally user add:", perr)
				return 1
			}
			body["password"] = pw
		}
		if *fromStdin {
			line, rerr := bufio.NewReader(stdin).ReadString('\n')
			if rerr != nil && !errors.Is(rerr, io.EOF) {
				fmt.Fprintln(stderr, "tally user add: read the password:", rerr)
				return 1
			}
			body["password"] = strings.TrimRight(line, "\r\n")
		}
		err = askServer(ctx, base, *token, "/v1/users", body, &answer)
	} else {
		err = askServer(ctx, base, *token, "/v1/users/password-link", map[string]any{"email": *email}, &answer)
	}
	if err != nil {
		fmt.Fprintf(stderr, "tally user %s: %v\n", sub, err)
		return 1
	}
	link := strings.TrimRight(*baseURL, "/")
	switch {
	case sub == "add" && answer.Link == nil:
		fmt.Fprintf(stdout, "tally user add: %s is %s of %s and can sign in now\n", answer.Email, answer.Role, *workspace)
		return 0
	case sub == "add":
		fmt.Fprintf(stdout, "tally user add: %s is %s of %s; the password is set with this link, once, until %s:\n", answer.Email, answer.Role, *workspace, answer.Link.ExpiresAt)
		link += answer.Link.Path
	default:
		fmt.Fprintf(stdout, "tally user reset-password: a new password for %s is set with this link, once, until %s:\n", *email, answer.ExpiresAt)
		link += answer.Path
	}
	fmt.Fprintln(stdout, link)
	return 0
}

// askPassword asks for a password on the terminal tty, twice, with echo
// off, so it is neither shown nor left in the shell's history.
func askPassword(tty *os.File, prompts io.Writer) (string, error) {
	fd := int(tty.Fd())
	if !term.IsTerminal(fd) {
		return "", errors.New("--password-prompt needs a terminal; pipe the password with --password-stdin instead")
	}
	fmt.Fprint(prompts, "Password: ")
	first, err := term.ReadPassword(fd)
	fmt.Fprintln(prompts)
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	fmt.Fprint(prompts, "Again: ")
	again, err := term.ReadPassword(fd)
	fmt.Fprintln(prompts)
	if err != nil {
		return "", fmt.Errorf("read the password: %w", err)
	}
	if !bytes.Equal(first, again) {
		return "", errors.New("the two passwords differ; nothing was changed")
	}
	return string(first), nil
}

const userUsage = `usage: tally user add --email E --workspace W [--role owner|admin|viewer] [--password-prompt | --password-stdin]
       tally user reset-password --email E

add creates a user with a role in a workspace: with --password-prompt the
password is asked on the terminal (twice, not echoed), with --password-stdin
it is the first line of standard input, else a one-time set-password link
is printed. reset-password prints a one-time link (an hour) that sets
a new password. Both ask the running server at QUERY_ADDR with ADMIN_TOKEN.`

// defaultBaseURL is where people reach the dashboard, as far as the
// settings tell: PUBLIC_URL, else the first TLS_DOMAINS name over HTTPS,
// else the query API's listen address.
func defaultBaseURL(getenv func(string) string) string {
	if u := strings.TrimRight(getenv("PUBLIC_URL"), "/"); u != "" {
		return u
	}
	if d := strings.TrimSpace(strings.Split(getenv("TLS_DOMAINS"), ",")[0]); d != "" {
		return "https://" + d
	}
	addr := getenv("QUERY_ADDR")
	if addr == "" {
		addr = ":8081"
	}
	return serverURL(addr)
}

// askServer POSTs body to the server at base and decodes its answer into
// out, or returns the server's error message.
func askServer(ctx context.Context, base, token, path string, body any, out any) error {
	buf, _ := json.Marshal(body)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+path, bytes.NewReader(buf))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+token)
	client := &http.Client{Transport: &http.Transport{DialContext: (&net.Dialer{Timeout: 2 * time.Second}).DialContext}}
	res, err := client.Do(req)
	if err != nil {
		return fmt.Errorf("no server answered at %s (start it, or set QUERY_ADDR): %w", base, err)
	}
	defer res.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(res.Body, 1<<20))
	if res.StatusCode/100 != 2 {
		var e struct {
			Error struct{ Code, Message string } `json:"error"`
		}
		if json.Unmarshal(b, &e) == nil && e.Error.Code != "" {
			return fmt.Errorf("the server refused: %s (%s)", e.Error.Message, e.Error.Code)
		}
		return fmt.Errorf("the server at %s answered %s", base, res.Status)
	}
	return json.Unmarshal(b, out)
}
