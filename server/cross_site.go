package server

import (
	"mime"
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/tally-analytics/tally/fault"
)

// crossOrigin detects browser requests sent from another origin, by
// Sec-Fetch-Site or by comparing Origin with Host.
var crossOrigin = http.NewCrossOriginProtection()

// refuseCrossSite guards the dev endpoints that change data and take no
// credential. Any web page a developer visits could otherwise wipe the dev
// data with a form post. A form can only send urlencoded, multipart or
// text/plain bodies, and a page's fetch with a JSON content type needs a
// CORS preflight the query API never grants, so requiring JSON stops every
// cross-site browser request; the Origin check refuses them even before
// that, with a clearer message. Scripts and curl send no Origin and pass.
func refuseCrossSite(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return fault.Errorf(fault.Forbidden, "cross-origin request refused: call this endpoint from a script or curl, not from a web page of another origin")
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return fault.Errorf(fault.UnsupportedMedia, "send Content-Type: application/json (a cross-site form cannot), e.g. curl -X POST -H 'Content-Type: application/json' %s", r.URL.Path)
	}
	return nil
}

// refuseCrossOrigin is refuseCrossSite for the bodiless DELETEs of the dev
// endpoints: no form can send a DELETE, and a page's fetch of one needs a
// preflight the query API never grants, so only the Origin check is left
// to do, for its clearer message.
func refuseCrossOrigin(r *http.Request) error {
	if err := crossOrigin.Check(r); err != nil {
		return fault.Errorf(fault.Forbidden, "cross-origin request refused: call this endpoint from a script or curl, not from a web page of another origin")
	}
	return nil
}

// refuseForeignHost guards the dev endpoints, which take no credential,
// against DNS rebinding: a page of evil.example whose name is made to
// resolve to 127.0.0.1 is same-origin to the browser, Origin and Host
// agree, and it could read the feed's payloads or wipe the data. Its
// requests still carry Host: evil.example, so unless anyHost is set
// (DEV_ALLOW_REMOTE), only requests addressed to localhost or a loopback
// address are served.
func refuseForeignHost(r *http.Request, anyHost bool) error {
	if anyHost {
		return nil
	}
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.TrimSuffix(strings.TrimPrefix(host, "["), "]")
	if strings.EqualFold(host, "localhost") {
		return nil
	}
	if ip, err := netip.ParseAddr(host); err == nil && ip.IsLoopback() {
		return nil
	}
	return fault.Errorf(fault.Forbidden, "the debug endpoints answer only requests addressed to localhost or a loopback address (set DEV_ALLOW_REMOTE to serve other host names)")
}
