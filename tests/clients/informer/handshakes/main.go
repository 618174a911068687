// Command handshakes makes full TLS handshakes one after the other against a server, as a
// client-go agent's transport makes them: Go's crypto/tls with a client certificate, no session
// cache (client-go sets no ClientSessionCache, so nothing is resumed), ALPN h2 then http/1.1.
// Each connection is closed after its handshake, as Go's transport closes the connections it
// dialed for requests that another connection took; with --request, each instead sends one
// HTTP/1.1 GET of --path and reads the answer, as the connection an agent keeps does. With
// --hold, those connections stay open (their requests say keep-alive) until standard input
// closes, so the server's memory per held connection can be read meanwhile.
//
// For tests/bench/run-handshake-bench, which measures the server's CPU around a run. Prints
// one JSON object: handshakes made, seconds, and the first error (exit status 1) if any.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"time"
)

type result struct {
	Handshakes int     `json:"handshakes"`
	Seconds    float64 `json:"seconds"`
	Error      string  `json:"error,omitempty"`
}

func config(caFile, certFile, keyFile, serverName string, request bool) (*tls.Config, error) {
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, err
	}
	pem, err := os.ReadFile(caFile)
	if err != nil {
		return nil, err
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s: no certificate", caFile)
	}
	protos := []string{"h2", "http/1.1"}
	if request {
		protos = []string{"http/1.1"} // The request below is HTTP/1.1.
	}
	return &tls.Config{Certificates: []tls.Certificate{cert}, RootCAs: roots,
		ServerName: serverName, NextProtos: protos}, nil
}

// once makes one connection: its handshake, then the request when path is not empty. With
// hold, the request asks to keep the connection and it is returned open; otherwise it is
// closed and nil is returned.
func once(addr, path string, cfg *tls.Config, hold bool) (net.Conn, error) {
	conn, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	if path == "" {
		return nil, conn.Close()
	}
	connection := "close"
	if hold {
		connection = "keep-alive"
	}
	if _, err := fmt.Fprintf(conn, "GET %s HTTP/1.1\r\nHost: %s\r\nConnection: %s\r\n\r\n", path, cfg.ServerName, connection); err != nil {
		conn.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReader(conn), nil)
	if err != nil {
		conn.Close()
		return nil, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		conn.Close()
		return nil, fmt.Errorf("GET %s: %s", path, resp.Status)
	}
	if !hold {
		return nil, conn.Close()
	}
	return conn, nil
}

func main() {
	addr := flag.String("addr", "", "server HOST:PORT")
	n := flag.Int("n", 1000, "handshakes to make")
	caFile := flag.String("ca", "", "CA bundle that signed the server's certificate")
	certFile := flag.String("cert", "", "client certificate")
	keyFile := flag.String("key", "", "client certificate's key")
	serverName := flag.String("server-name", "localhost", "name the server's certificate is checked for")
	request := flag.Bool("request", false, "send one HTTP/1.1 GET of --path on each connection")
	path := flag.String("path", "/livez", "the request's path, with --request")
	hold := flag.Bool("hold", false, "with --request: keep every connection open until standard input closes (the JSON result is printed first)")
	flag.Parse()
	cfg, err := config(*caFile, *certFile, *keyFile, *serverName, *request)
	if err != nil {
		fmt.Fprintln(os.Stderr, "handshakes:", err)
		os.Exit(1)
	}
	if !*request {
		*path = ""
	}
	if *hold && !*request {
		fmt.Fprintln(os.Stderr, "handshakes: --hold needs --request")
		os.Exit(2)
	}
	out := result{}
	var held []net.Conn
	start := time.Now()
	for out.Handshakes < *n {
		conn, err := once(*addr, *path, cfg, *hold)
		if err != nil {
			out.Error = err.Error()
			break
		}
		if conn != nil {
			held = append(held, conn)
		}
		out.Handshakes++
	}
	out.Seconds = time.Since(start).Seconds()
	_ = json.NewEncoder(os.Stdout).Encode(out)
	if *hold {
		_, _ = io.Copy(io.Discard, os.Stdin)
		for _, conn := range held {
			conn.Close()
		}
	}
	if out.Error != "" {
		os.Exit(1)
	}
}
