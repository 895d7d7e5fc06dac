#!/usr/bin/env bash
# make test-docker: the integration tests with every server in a container
# that testcontainers starts, none from the environment.
#
# Installs docker.io and debootstrap when missing, starts dockerd when no
# engine answers (and stops it at the end), builds the local images
# (build-images.sh), runs the suite with every POOLDRIVER_*_DSN unset, then
# fails if a container of the run is left.
#
# From the Makefile: GO, GOFLAGS_TEST and TAGS, build tags besides docker
# (e.g. "odbc"). The docker tag builds the tests' containers
# (containers_test.go); without it they have none.
# POOLDRIVER_TEST_POSTGRES_IMAGE / POOLDRIVER_TEST_MYSQL_IMAGE, when set,
# name the images to run instead of the local ones (which are then not
# built), e.g. the official postgres:15 and mariadb:10.11 on a machine
# that reaches Docker Hub.
set -euo pipefail
cd "$(dirname "$0")"

GO=${GO:-go}
GOFLAGS_TEST=${GOFLAGS_TEST:--race -count=1 -timeout 20m}
TAGS=${TAGS:-}
LOCAL_POSTGRES=pooldriver-test/postgres:15
LOCAL_MARIADB=pooldriver-test/mariadb:10.11
DOCKERD_LOG=${DOCKERD_LOG:-/tmp/pooldriver-dockerd.log}

log() { printf '== %s\n' "$*"; }
die() { printf 'test-docker: %s\n' "$*" >&2; exit 1; }

STARTED_DOCKERD= # pid of the dockerd this script started
EVENTS_PID=      # pid of the docker events reader
finish() {
	if [ -n "$EVENTS_PID" ]; then kill "$EVENTS_PID" 2>/dev/null || true; wait "$EVENTS_PID" 2>/dev/null || true; fi
	if [ -n "$STARTED_DOCKERD" ]; then
		log "stopping the dockerd this run started (pid $STARTED_DOCKERD)"
		kill "$STARTED_DOCKERD" 2>/dev/null || true
		local _
		for _ in $(seq 1 30); do kill -0 "$STARTED_DOCKERD" 2>/dev/null || return 0; sleep 1; done
		echo "test-docker: dockerd (pid $STARTED_DOCKERD) did not stop within 30s" >&2
	fi
}
trap finish EXIT

install_missing() { # install_missing <command>=<package>...
	local want=() pair
	for pair in "$@"; do
		command -v "${pair%%=*}" >/dev/null || want+=("${pair#*=}")
	done
	[ ${#want[@]} -gt 0 ] || return 0
	[ "$(id -u)" = 0 ] || die "missing ${want[*]}: install them (apt-get install ${want[*]}) or run as root"
	log "installing ${want[*]}"
	export DEBIAN_FRONTEND=noninteractive
	apt-get update -qq
	apt-get install -y -qq "${want[@]}" >/dev/null
}

ensure_dockerd() {
	if docker info >/dev/null 2>&1; then
		log "Docker engine: $(docker version -f '{{.Server.Version}}') (already running)"
		return
	fi
	[ "$(id -u)" = 0 ] || die "no Docker engine answers and only root can start dockerd"
	install_missing dockerd=docker.io
	log "starting dockerd (log: $DOCKERD_LOG)"
	dockerd >"$DOCKERD_LOG" 2>&1 &
	STARTED_DOCKERD=$!
	local _
	for _ in $(seq 1 60); do
		if docker info >/dev/null 2>&1; then
			log "Docker engine: $(docker version -f '{{.Server.Version}}'), storage $(docker info -f '{{.Driver}}'), cgroup driver $(docker info -f '{{.CgroupDriver}}')"
			return
		fi
		kill -0 "$STARTED_DOCKERD" 2>/dev/null || { STARTED_DOCKERD=; tail -n 20 "$DOCKERD_LOG" >&2; die "dockerd exited"; }
		sleep 1
	done
	tail -n 20 "$DOCKERD_LOG" >&2
	die "dockerd did not answer within 60s"
}

install_missing docker=docker.io
ensure_dockerd

POSTGRES_IMAGE=${POOLDRIVER_TEST_POSTGRES_IMAGE:-$LOCAL_POSTGRES}
MYSQL_IMAGE=${POOLDRIVER_TEST_MYSQL_IMAGE:-$LOCAL_MARIADB}
build=()
[ "$POSTGRES_IMAGE" != "$LOCAL_POSTGRES" ] || build+=(postgres)
[ "$MYSQL_IMAGE" != "$LOCAL_MARIADB" ] || build+=(mariadb)
if [ ${#build[@]} -gt 0 ]; then
	for image in "$LOCAL_POSTGRES" "$LOCAL_MARIADB"; do
		docker image inspect "$image" >/dev/null 2>&1 || { install_missing debootstrap=debootstrap; break; }
	done
	bash ./build-images.sh "${build[@]}"
fi

# Every server comes from a container: no DSN from the environment or from
# the Makefile (which sets them when the local ports answer).
for v in $(compgen -e); do
	case $v in POOLDRIVER_*_DSN) unset "$v" ;; esac
done
export POOLDRIVER_TEST_POSTGRES_IMAGE=$POSTGRES_IMAGE POOLDRIVER_TEST_MYSQL_IMAGE=$MYSQL_IMAGE
# The tests label their containers with this run and remove them at the end.
# Ryuk, testcontainers' own reaper, is an image from Docker Hub: without a
# registry it cannot start, so it is off unless asked for.
export POOLDRIVER_TEST_RUN="test-docker-$$-$(date +%s)"
export TESTCONTAINERS_RYUK_DISABLED=${TESTCONTAINERS_RYUK_DISABLED:-true}
# Where the containers' published ports are reached. A dockerd of this
# machine, on its Unix socket, publishes them here, on loopback. Left to
# itself, testcontainers sees /.dockerenv (this machine may itself be a
# container) and dials the gateway of Docker's default network or, when that
# network reports none, the machine's default route: another host, where
# nothing listens (CI saw "dial tcp 192.0.2.1:32768: i/o timeout").
if [ -z "${TESTCONTAINERS_HOST_OVERRIDE:-}" ] && [[ ${DOCKER_HOST:-unix://} == unix://* ]] && pgrep -x dockerd >/dev/null; then
	export TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1
fi

# The containers of the run, as the engine saw them, are shown at the end.
events=$(mktemp)
docker events --filter "label=pooldriver.test.run=$POOLDRIVER_TEST_RUN" --filter type=container \
	--filter event=start --filter event=die --filter event=destroy \
	--format '{{.Action}} {{.Actor.Attributes.image}} {{printf "%.12s" .Actor.ID}}' >"$events" &
EVENTS_PID=$!

log "integration tests, servers from containers: $POSTGRES_IMAGE, $MYSQL_IMAGE (run $POOLDRIVER_TEST_RUN)"
rc=0
# shellcheck disable=SC2086 # flag lists
(cd .. && "$GO" test $GOFLAGS_TEST -tags "docker${TAGS:+,$TAGS}" ./...) || rc=$?

sleep 1 # let docker events write the last removals
kill "$EVENTS_PID" 2>/dev/null || true
wait "$EVENTS_PID" 2>/dev/null || true
EVENTS_PID=
log "containers of the run:"
sed 's/^/   /' "$events"
for image in "$POSTGRES_IMAGE" "$MYSQL_IMAGE"; do
	if ! grep -q "^start $image " "$events"; then
		echo "test-docker: no container of $image started: the servers did not come from containers" >&2
		rc=1
	fi
done
rm -f "$events"

left=$(docker ps -a --filter "label=pooldriver.test.run=$POOLDRIVER_TEST_RUN" --format '{{.ID}} {{.Image}} {{.Status}}')
if [ -n "$left" ]; then
	echo "test-docker: containers left by the run (removed now):" >&2
	echo "$left" >&2
	docker rm -f $(awk '{ print $1 }' <<<"$left") >/dev/null
	rc=1
fi
exit $rc
