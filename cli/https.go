package cli

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/crypto/acme"
	"golang.org/x/crypto/acme/autocert"

	"github.com/tally-analytics/tally/server"
)

// acmeDirectoryURL is ACME_DIRECTORY_URL's default: Let's Encrypt.
const acmeDirectoryURL = autocert.DefaultACMEDirectory

// tlsSettings are the settings of docs/operations.md#https.
type tlsSettings struct {
	Domains           []string // TLS_DOMAINS: certificates over ACME
	CertFile, KeyFile string   // or the operator's own pair
	HTTPSAddr         string
	HTTPAddr          string // "" when HTTP_ADDR is off
	ACMEDirectoryURL  string
	ACMEEmail         string
}

// on reports whether HTTPS is served.
func (t tlsSettings) on() bool { return len(t.Domains) > 0 || t.CertFile != "" }

func loadTLSConfig(vals map[string]string) (tlsSettings, error) {
	t := tlsSettings{
		CertFile: vals["TLS_CERT_FILE"], KeyFile: vals["TLS_KEY_FILE"],
		HTTPSAddr: vals["HTTPS_ADDR"], HTTPAddr: vals["HTTP_ADDR"],
		ACMEDirectoryURL: vals["ACME_DIRECTORY_URL"], ACMEEmail: vals["ACME_EMAIL"],
	}
	if strings.EqualFold(t.HTTPAddr, "off") {
		t.HTTPAddr = ""
	}
	for d := range strings.SplitSeq(vals["TLS_DOMAINS"], ",") {
		d = strings.ToLower(strings.TrimSpace(d))
		if d == "" {
			continue
		}
		if !validDomain(d) {
			return t, fmt.Errorf("TLS_DOMAINS: %q is not a host name (no scheme, port or wildcard: ACME's HTTP-01 and TLS-ALPN-01 challenges cannot prove a wildcard)", d)
		}
		t.Domains = append(t.Domains, d)
	}
	if (t.CertFile == "") != (t.KeyFile == "") {
		return t, fmt.Errorf("TLS_CERT_FILE and TLS_KEY_FILE go together: set both or neither")
	}
	if len(t.Domains) > 0 && t.CertFile != "" {
		return t, fmt.Errorf("set TLS_DOMAINS (certificates over ACME) or TLS_CERT_FILE and TLS_KEY_FILE (your own), not both")
	}
	if u, err := url.Parse(t.ACMEDirectoryURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return t, fmt.Errorf("ACME_DIRECTORY_URL must be an https:// URL, not %q", t.ACMEDirectoryURL)
	}
	if t.ACMEEmail != "" && !strings.Contains(t.ACMEEmail, "@") {
		return t, fmt.Errorf("ACME_EMAIL must be an email address, not %q", t.ACMEEmail)
	}
	if !t.on() {
		return t, nil
	}
	for _, l := range []struct{ name, addr string }{{"HTTPS_ADDR", t.HTTPSAddr}, {"HTTP_ADDR", t.HTTPAddr}} {
		if err := validListenAddr(l.addr); l.addr != "" && err != nil {
			return t, fmt.Errorf("%s: %w", l.name, err)
		}
	}
	return t, nil
}

// validDomain accepts a DNS name of letters, digits and hyphens, as the
// ACME CA will be asked for it.
func validDomain(d string) bool {
	if len(d) > 253 || net.ParseIP(d) != nil {
		return false
	}
	for label := range strings.SplitSeq(d, ".") {
		if label == "" || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		for _, r := range label {
			if !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-') {
				return false
			}
		}
	}
	return true
}

// validListenAddr accepts host:port with a port number (0 picks one).
func validListenAddr(addr string) error {
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q is not host:port", addr)
	}
	if n, err := strconv.Atoi(port); err != nil || n < 0 || n > 65535 {
		return fmt.Errorf("%q has no port number", addr)
	}
	return nil
}

// acmeCacheDir is where certificates and the ACME account key are kept:
// the folder "acme" beside the database file, so that they live (and are
// backed up) with the data; for a :memory: database, the user's cache
// folder ($XDG_CACHE_HOME or ~/.cache), as certificates outlive a process
// and the CA limits how often one name gets a new one.
func (c config) acmeCacheDir() (string, error) {
	if c.DatabasePath != ":memory:" {
		return filepath.Join(filepath.Dir(c.DatabasePath), "acme"), nil
	}
	dir, err := os.UserCacheDir()
	if err != nil {
		return "", fmt.Errorf("TLS_DOMAINS with DATABASE_PATH=:memory: keeps certificates in the user's cache folder, which is unknown here: %w", err)
	}
	return filepath.Join(dir, "tally", "acme"), nil
}

// httpsSetup is what ServeHTTPS needs, and what SIGHUP reloads (nil for
// ACME, whose certificates renew by themselves).
func (c config) httpsSetup(log *slog.Logger) (server.HTTPS, *server.CertFiles, error) {
	h := server.HTTPS{Addr: c.TLS.HTTPSAddr, RedirectAddr: c.TLS.HTTPAddr}
	if c.TLS.CertFile != "" {
		files, err := server.LoadCertFiles(c.TLS.CertFile, c.TLS.KeyFile, log)
		if err != nil {
			return h, nil, err
		}
		h.TLS = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: files.GetCertificate}
		return h, files, nil
	}
	dir, err := c.acmeCacheDir()
	if err != nil {
		return h, nil, err
	}
	m := &autocert.Manager{
		Prompt:     autocert.AcceptTOS,
		Cache:      autocert.DirCache(dir),
		HostPolicy: autocert.HostWhitelist(c.TLS.Domains...),
		Client:     &acme.Client{DirectoryURL: c.TLS.ACMEDirectoryURL},
		Email:      c.TLS.ACMEEmail,
	}
	h.TLS = m.TLSConfig()
	h.TLS.MinVersion = tls.VersionTLS12
	if h.RedirectAddr != "" {
		h.Challenges = func(fallback http.Handler) http.Handler {
			challenges := m.HTTPHandler(fallback)
			// A CA validates on port 80, whose Host carries no port; one
			// sent elsewhere (a port forward, Pebble in the tests) sends
			// the port too, which the host policy would refuse.
			return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if host, _, err := net.SplitHostPort(r.Host); err == nil {
					r.Host = host
				}
				challenges.ServeHTTP(w, r)
			})
		}
	}
	return h, nil, nil
}
