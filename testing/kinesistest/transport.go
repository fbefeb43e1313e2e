package kinesistest

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"
)

// The server's transports. The plain port speaks HTTP/1.1 and cleartext
// HTTP/2 with prior knowledge (h2c, as the JavaScript SDK v3 and Netty-based
// Java clients use it against an http:// endpoint that answers h2); the
// optional TLS port negotiates h2 or http/1.1 through ALPN with a self-signed
// certificate the server makes at start, and also accepts HTTP/2 with prior
// knowledge over TLS without ALPN, which is what the Java SDK v2's Netty
// client sends by default (ProtocolNegotiation.ASSUME_PROTOCOL). net/http
// only serves HTTP/2 on a TLS connection that negotiated h2, so the TLS port
// terminates TLS itself and hands net/http the decrypted connection, where
// the HTTP/2 preface is recognised whatever ALPN said.

// newHTTPServer returns the http.Server of one listener: HTTP/1.1 and
// HTTP/2 with prior knowledge over the (decrypted) connection.
func (s *Server) newHTTPServer() *http.Server {
	p := new(http.Protocols)
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	return &http.Server{
		Handler:           s,
		ReadHeaderTimeout: 30 * time.Second,
		ConnState:         s.trackConn,
		ErrorLog:          log.New(io.Discard, "", 0), // clients hanging up are expected in fault tests
		Protocols:         p,
	}
}

// tlsListener is the optional TLS port.
type tlsListener struct {
	ln       net.Listener
	http     *http.Server
	url      string
	certFile string
	pool     *x509.CertPool
	ownsFile bool // the server chose the file and removes it on Shutdown
}

// startTLS listens on addr with a fresh self-signed certificate for
// 127.0.0.1, ::1 and localhost, written as PEM to certFile (a new temporary
// file when empty).
func (s *Server) startTLS(addr, certFile string) (*tlsListener, error) {
	cert, certPEM, err := selfSignedCert()
	if err != nil {
		return nil, err
	}
	t := &tlsListener{certFile: certFile}
	if certFile == "" {
		dir, err := os.MkdirTemp("", "kinesistest-tls-")
		if err != nil {
			return nil, fmt.Errorf("making a directory for the certificate: %w", err)
		}
		t.certFile, t.ownsFile = filepath.Join(dir, "cert.pem"), true
	}
	if err := os.WriteFile(t.certFile, certPEM, 0o644); err != nil {
		return nil, fmt.Errorf("writing the TLS certificate: %w", err)
	}
	t.pool = x509.NewCertPool()
	t.pool.AppendCertsFromPEM(certPEM)
	conf := &tls.Config{
		Certificates: []tls.Certificate{cert},
		NextProtos:   []string{"h2", "http/1.1"},
		MinVersion:   tls.VersionTLS12,
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.remove()
		return nil, fmt.Errorf("listening for TLS on %s: %w", addr, err)
	}
	t.ln = ln
	t.url = "https://" + hostPort(ln.Addr())
	t.http = s.newHTTPServer()
	go t.http.Serve(tlsTerminator{Listener: ln, conf: conf}) //nolint:errcheck // returns ErrServerClosed on Close
	return t, nil
}

// tlsTerminator accepts TLS connections and returns them as plain
// net.Conns, so that net/http treats the decrypted bytes as cleartext
// HTTP/1.1 or HTTP/2 (see the top of this file). The handshake happens on
// the connection's first read, in net/http's goroutine for it.
type tlsTerminator struct {
	net.Listener
	conf *tls.Config
}

func (t tlsTerminator) Accept() (net.Conn, error) {
	c, err := t.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return decrypted{tls.Server(c, t.conf)}, nil
}

// decrypted hides a *tls.Conn's type from net/http.
type decrypted struct{ net.Conn }

// remove deletes the certificate file if the server made it.
func (t *tlsListener) remove() {
	if t.ownsFile {
		os.RemoveAll(filepath.Dir(t.certFile))
	}
}

// selfSignedCert makes an ECDSA P-256 certificate valid for a day for the
// loopback names, and returns it with its PEM encoding.
func selfSignedCert() (tls.Certificate, []byte, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making a TLS key: %w", err)
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("making a certificate serial: %w", err)
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: "kinesistest", Organization: []string{"beamkinesis test server"}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
		IsCA:                  true, // clients trust it as its own root
		DNSNames:              []string{"localhost"},
		IPAddresses:           []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("signing the TLS certificate: %w", err)
	}
	keyDER, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("encoding the TLS key: %w", err)
	}
	certPEM := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})
	keyPEM := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: keyDER})
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return tls.Certificate{}, nil, fmt.Errorf("loading the TLS key pair: %w", err)
	}
	return cert, certPEM, nil
}

// TLSURL returns the TLS endpoint, e.g. "https://127.0.0.1:39402", or "" when
// the server was started without WithTLS.
func (s *Server) TLSURL() string {
	if s.tls == nil {
		return ""
	}
	return s.tls.url
}

// CertFile returns the path of the PEM file holding the TLS port's
// self-signed certificate (for AWS_CA_BUNDLE, the CLI's --ca-bundle or
// NODE_EXTRA_CA_CERTS), or "" without WithTLS. A file the server chose is
// removed by Shutdown.
func (s *Server) CertFile() string {
	if s.tls == nil {
		return ""
	}
	return s.tls.certFile
}

// CertPool returns a pool holding only the TLS port's certificate, or nil
// without WithTLS.
func (s *Server) CertPool() *x509.CertPool {
	if s.tls == nil {
		return nil
	}
	return s.tls.pool
}

// TLSHTTPClient returns an HTTP client like HTTPClient's that trusts the TLS
// port's certificate and negotiates HTTP/2 with it, or nil without WithTLS.
func (s *Server) TLSHTTPClient() *http.Client {
	if s.tls == nil {
		return nil
	}
	return newHTTPClient(func(t *http.Transport) {
		t.TLSClientConfig = &tls.Config{RootCAs: s.tls.pool, MinVersion: tls.VersionTLS12}
		t.ForceAttemptHTTP2 = true
	})
}

// H2CHTTPClient returns an HTTP client that speaks cleartext HTTP/2 with
// prior knowledge to the plain port, as some SDKs do.
func H2CHTTPClient() *http.Client {
	return newHTTPClient(func(t *http.Transport) {
		p := new(http.Protocols)
		p.SetUnencryptedHTTP2(true)
		t.Protocols = p
	})
}
