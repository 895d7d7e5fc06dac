#!/usr/bin/env bash
# Builds the server images the integration tests run through testcontainers
# on a machine that reaches no image registry: PostgreSQL 15 and MariaDB
# 10.11 from Debian's own packages (debootstrap --variant=minbase from the
# configured Debian mirror, then docker import). An image that already
# exists is kept: delete it (docker rmi NAME) to rebuild it.
#
#   build-images.sh            builds both
#   build-images.sh postgres   builds one (postgres | mariadb)
#
# The images behave like the official ones as far as the tests see: the
# server logs to stdout/stderr ("database system is ready to accept
# connections"; "... port: 3306 ..."), listens on every address, trusts
# connections from its own (bridge) network as user postgres / root with an
# empty password, and has a database named test.
set -euo pipefail

POSTGRES_IMAGE=pooldriver-test/postgres:15
MARIADB_IMAGE=pooldriver-test/mariadb:10.11
SUITE=bookworm # the Debian release whose PostgreSQL is 15 and MariaDB 10.11

log() { printf '== %s\n' "$*"; }
die() { printf 'build-images: %s\n' "$*" >&2; exit 1; }

# debian_mirror prints the URI apt uses for $SUITE (deb822 .sources files,
# then one-line .list files); DEBIAN_MIRROR overrides it.
debian_mirror() {
	if [ -n "${DEBIAN_MIRROR:-}" ]; then echo "$DEBIAN_MIRROR"; return; fi
	local f uri
	for f in /etc/apt/sources.list.d/*.sources; do
		[ -f "$f" ] || continue
		uri=$(awk -v suite="$SUITE" 'BEGIN { RS = ""; FS = "\n" }
			{
				types = ""; uris = ""; suites = ""; enabled = "yes"
				for (i = 1; i <= NF; i++) {
					if ($i ~ /^Types:/) types = $i
					else if ($i ~ /^URIs:/) uris = $i
					else if ($i ~ /^Suites:/) suites = $i
					else if ($i ~ /^Enabled:/) enabled = $i
				}
				if (types ~ /[ \t]deb([ \t]|$)/ && (" " suites " ") ~ ("[ \t]" suite "[ \t]") && enabled !~ /no/) {
					split(uris, u, /[ \t]+/); print u[2]; exit
				}
			}' "$f")
		if [ -n "$uri" ]; then echo "$uri"; return; fi
	done
	for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
		[ -f "$f" ] || continue
		uri=$(awk -v suite="$SUITE" '$1 == "deb" {
				i = 2; if ($2 ~ /^\[/) { while ($i !~ /\]$/) i++; i++ }
				if ($(i + 1) == suite) { print $i; exit }
			}' "$f")
		if [ -n "$uri" ]; then echo "$uri"; return; fi
	done
	die "no apt source for Debian $SUITE in /etc/apt; set DEBIAN_MIRROR=http://deb.debian.org/debian"
}

# rootfs <dir> <package>: a minimal Debian $SUITE with the package installed.
rootfs() {
	local dir=$1 pkg=$2 mirror
	mirror=$(debian_mirror)
	log "debootstrap $SUITE + $pkg from $mirror"
	# C.UTF-8 is built into glibc: the cluster and the server get a UTF-8
	# locale, as on the local servers, without the locales package.
	LC_ALL=C.UTF-8 LANG=C.UTF-8 debootstrap --variant=minbase --include="$pkg" \
		"$SUITE" "$dir" "$mirror" >"$dir.log" 2>&1 ||
		{ tail -n 30 "$dir.log" >&2; die "debootstrap failed (log: $dir.log)"; }
	rm -f "$dir.log"
}

# in_root <dir> <user> <command...>: runs a command inside the tree.
in_root() {
	local dir=$1 user=$2; shift 2
	LC_ALL=C.UTF-8 LANG=C.UTF-8 chroot --userspec="$user:$user" "$dir" "$@"
}

# import <dir> <image> <docker import --change...>: the tree as an image,
# without what only takes room.
import() {
	local dir=$1 image=$2; shift 2
	rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/* \
		"$dir"/usr/share/doc/* "$dir"/usr/share/man/* "$dir"/usr/share/locale/*
	local changes=() c
	for c in "$@"; do changes+=(--change "$c"); done
	tar --numeric-owner -C "$dir" -c . | docker import "${changes[@]}" - "$image" >/dev/null
	log "built $image ($(docker image inspect -f '{{.Size}}' "$image" | awk '{ printf "%d MB", $1 / 1e6 }'))"
}

build_postgres() {
	local dir=$1 conf=$1/etc/postgresql/15/main
	rootfs "$dir" postgresql-15
	[ -f "$conf/postgresql.conf" ] || die "postgresql-15 created no cluster in $conf"
	cat >>"$conf/postgresql.conf" <<-'EOF'

	# pooldriver-test: reachable through the container's published port.
	# (pg_createcluster picks a port free on the host that builds the image.)
	listen_addresses = '*'
	port = 5432
	ssl = off
	# A throwaway test server: durability buys nothing here.
	fsync = off
	synchronous_commit = off
	full_page_writes = off
	EOF
	# Published ports reach the server from the bridge network's gateway.
	printf '\n# pooldriver-test\nhost all all samenet trust\n' >>"$conf/pg_hba.conf"
	in_root "$dir" root install -d -o postgres -g postgres -m 2775 /run/postgresql
	echo "CREATE DATABASE test" |
		in_root "$dir" postgres /usr/lib/postgresql/15/bin/postgres --single -D /etc/postgresql/15/main postgres \
			>"$dir/tmp/setup.log" 2>&1 || { cat "$dir/tmp/setup.log" >&2; die "CREATE DATABASE test failed"; }
	rm -f "$dir/tmp/setup.log"
	import "$dir" "$POSTGRES_IMAGE" \
		'ENV PATH=/usr/lib/postgresql/15/bin:/usr/sbin:/usr/bin:/sbin:/bin' 'ENV LANG=C.UTF-8' \
		'USER postgres' 'EXPOSE 5432' \
		'CMD ["postgres", "-D", "/etc/postgresql/15/main"]'
}

build_mariadb() {
	local dir=$1
	rootfs "$dir" mariadb-server
	cat >"$dir/etc/mysql/mariadb.conf.d/99-pooldriver-test.cnf" <<-'EOF'
	# pooldriver-test: reachable through the container's published port;
	# no reverse DNS for the bridge network's addresses.
	[mysqld]
	bind-address = *
	skip-name-resolve
	EOF
	in_root "$dir" root install -d -o mysql -g mysql /run/mysqld
	# The server, without networking, long enough to add the accounts.
	in_root "$dir" mysql /usr/sbin/mariadbd --skip-networking >"$dir/tmp/setup.log" 2>&1 &
	SETUP_PID=$!
	local i
	for i in $(seq 1 60); do
		in_root "$dir" root mariadb-admin ping >/dev/null 2>&1 && break
		kill -0 "$SETUP_PID" 2>/dev/null || { cat "$dir/tmp/setup.log" >&2; die "mariadbd exited during setup"; }
		sleep 1
	done
	in_root "$dir" root mariadb <<-'EOF'
	CREATE USER 'root'@'%' IDENTIFIED BY '';
	GRANT ALL PRIVILEGES ON *.* TO 'root'@'%' WITH GRANT OPTION;
	CREATE DATABASE test;
	EOF
	in_root "$dir" root mariadb-admin shutdown
	wait "$SETUP_PID" || true
	SETUP_PID=
	rm -f "$dir/tmp/setup.log"
	import "$dir" "$MARIADB_IMAGE" \
		'ENV LANG=C.UTF-8' 'USER mysql' 'EXPOSE 3306' \
		'CMD ["mariadbd"]'
}

build() { # build <postgres|mariadb>
	local what=$1 image
	case $what in
	postgres) image=$POSTGRES_IMAGE ;;
	mariadb) image=$MARIADB_IMAGE ;;
	*) die "unknown image $what (postgres | mariadb)" ;;
	esac
	if docker image inspect "$image" >/dev/null 2>&1; then
		log "$image: present"
		return
	fi
	[ "$(id -u)" = 0 ] || die "building $image needs root (debootstrap, chroot)"
	command -v debootstrap >/dev/null || die "debootstrap is not installed"
	BUILD_DIR=$(mktemp -d /var/tmp/pooldriver-rootfs.XXXXXX)
	build_"$what" "$BUILD_DIR/root"
	cleanup
}

BUILD_DIR=  # the tree being built, removed on exit
SETUP_PID=  # a server started in it for setup, stopped on exit
cleanup() {
	if [ -n "$SETUP_PID" ]; then kill "$SETUP_PID" 2>/dev/null || true; wait "$SETUP_PID" 2>/dev/null || true; fi
	SETUP_PID=
	[ -n "$BUILD_DIR" ] || return 0
	# Never follow a mount debootstrap left in the tree out of it.
	local m
	for m in $(awk -v d="$BUILD_DIR/" 'index($2, d) == 1 { print $2 }' /proc/mounts | sort -r); do
		umount -l "$m" || true
	done
	rm -rf --one-file-system "$BUILD_DIR"
	BUILD_DIR=
}
trap cleanup EXIT

if [ $# -eq 0 ]; then set -- postgres mariadb; fi
for what in "$@"; do build "$what"; done
