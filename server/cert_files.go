package server

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"
)

// CertFiles serves a certificate and key the operator manages in two PEM
// files (docs/operations.md#https). It loads them again when either file
// changes, checked by a stat of each at every handshake, and on Reload
// (SIGHUP). A pair that does not load (a renewal half written, a key that does
// not match) leaves the previous certificate in service.
type CertFiles struct {
	certPath, keyPath string
	log               *slog.Logger

	mu   sync.Mutex
	cert *tls.Certificate
	// seen are the files' stamps when last tried, loaded or not: a broken
	// pair is tried again once a file changes, not at every handshake.
	seen [2]fileStamp
}

// fileStamp is what tells that a file changed: a rewrite changes the
// modification time, a rename onto the path usually the size as well.
type fileStamp struct {
	mod  time.Time
	size int64
}

// LoadCertFiles loads the pair once, failing if it cannot be used.
func LoadCertFiles(certPath, keyPath string, log *slog.Logger) (*CertFiles, error) {
	c := &CertFiles{certPath: certPath, keyPath: keyPath, log: log}
	seen, err := c.stamps()
	if err != nil {
		return nil, fmt.Errorf("TLS_CERT_FILE and TLS_KEY_FILE: %w", err)
	}
	cert, err := tls.LoadX509KeyPair(certPath, keyPath)
	if err != nil {
		return nil, fmt.Errorf("TLS_CERT_FILE and TLS_KEY_FILE: %w", err)
	}
	c.cert, c.seen = &cert, seen
	return c, nil
}

// GetCertificate is tls.Config.GetCertificate: the current certificate,
// loaded again first if a file changed since it was last tried.
func (c *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	seen, err := c.stamps()
	c.mu.Lock()
	defer c.mu.Unlock()
	if err == nil && seen != c.seen {
		c.seen = seen
		c.loadLocked("changed")
	}
	return c.cert, nil
}

// Reload loads the pair again whether or not the files look changed, and
// reports whether the new one is in service.
func (c *CertFiles) Reload() bool {
	seen, _ := c.stamps()
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seen = seen
	return c.loadLocked("SIGHUP")
}

func (c *CertFiles) loadLocked(why string) bool {
	cert, err := tls.LoadX509KeyPair(c.certPath, c.keyPath)
	if err != nil {
		c.log.Error("TLS certificate not reloaded; the previous one stays in service", "why", why, "err", err.Error())
		return false
	}
	c.cert = &cert
	c.log.Info("TLS certificate reloaded", "why", why, "not_after", cert.Leaf.NotAfter.UTC().Format(time.RFC3339))
	return true
}

func (c *CertFiles) stamps() ([2]fileStamp, error) {
	var s [2]fileStamp
	for i, p := range []string{c.certPath, c.keyPath} {
		fi, err := os.Stat(p)
		if err != nil {
			return s, err
		}
		s[i] = fileStamp{fi.ModTime(), fi.Size()}
	}
	return s, nil
}
