//go:build !docker

package integration

// Without the docker build tag the test binary holds no Docker client:
// a server whose DSN variable is unset is not started in a container, and
// TestMain says how to get one (containers_test.go is the tagged side).

import (
	"errors"
	"time"
)

const dockerCheckTimeout = 0

var errNoDockerTag = errors.New("built without the docker tag; go test -tags docker starts the servers in containers")

// dockerAnswers says that no engine is asked: the binary cannot use one.
func dockerAnswers(time.Duration) error { return errNoDockerTag }

// startContainers is never reached: dockerAnswers always fails.
func startContainers([]string) (stop func(), err error) { return func() {}, errNoDockerTag }
