package components

import (
	"context"
	"errors"
	"net/http"
	"path/filepath"
	"testing"
)

func TestStartMotoWithoutTheVirtualenvIsUnavailable(t *testing.T) {
	_, err := StartMoto(context.Background(), filepath.Join(t.TempDir(), "bin", "python"))
	if !errors.Is(err, ErrUnavailable) {
		t.Errorf("StartMoto without moto_server: error %v, want one wrapping ErrUnavailable", err)
	}
}

func TestStartMotoAnswersUntilStopped(t *testing.T) {
	python := PythonT(t)
	m, err := StartMoto(context.Background(), python)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.Get(m.Endpoint + "/moto-api/reset-auth")
	if err != nil {
		t.Fatalf("moto_server does not answer after StartMoto: %v", err)
	}
	resp.Body.Close()
	if err := m.Stop(); err != nil {
		t.Fatal(err)
	}
	if resp, err := http.Get(m.Endpoint + "/moto-api/reset-auth"); err == nil {
		resp.Body.Close()
		t.Errorf("moto_server still answers on %s after Stop", m.Endpoint)
	}
}
