//go:build tools

// Package tools names the program this module builds, so that go.mod and go.sum pin it.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
