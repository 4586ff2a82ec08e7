#!/usr/bin/env bash
# Builds the sandgate container image FROM scratch (deploy/image/Dockerfile)
# around a static binary (make image builds it: CGO_ENABLED=0, -trimpath,
# the version and commit stamped). Nothing is pulled: the context holds
# every file of the image, the CA bundle copied from this host. Needs Docker.
#   build.sh BINARY VERSION COMMIT TAG [TAG...]
set -euo pipefail
if [ $# -lt 4 ]; then
	echo "usage: $0 BINARY VERSION COMMIT TAG [TAG...]" >&2
	exit 2
fi
bin=$1 version=$2 commit=$3
shift 3
uid=65532 # the image's user: numeric, not root, no login
ca=/etc/ssl/certs/ca-certificates.crt

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
root=$work/rootfs
mkdir -p "$root/usr/local/bin" "$root/etc/ssl/certs" "$root/etc/sandgate" "$root/tmp" "$work/data"
install -m 0755 "$bin" "$root/usr/local/bin/sandgate"
chmod 1777 "$root/tmp"
chmod 0700 "$work/data"
printf 'root:x:0:0:root:/:/sbin/nologin\nsandgate:x:%d:%d:sandgate:/var/lib/sandgate:/sbin/nologin\n' "$uid" "$uid" > "$root/etc/passwd"
printf 'root:x:0:\nsandgate:x:%d:\n' "$uid" > "$root/etc/group"
if [ -f "$ca" ]; then
	install -m 0644 "$ca" "$root/etc/ssl/certs/ca-certificates.crt"
else
	echo "build.sh: no CA bundle at $ca: the image trusts no certificate authority (TLS to Nomad needs nomad.ca_cert)" >&2
fi
cp "$(dirname "$0")/Dockerfile" "$work/Dockerfile"

tags=()
for t in "$@"; do tags+=(-t "$t"); done
docker build -q --build-arg "VERSION=$version" --build-arg "COMMIT=$commit" "${tags[@]}" "$work" >/dev/null
echo "built $* (FROM scratch, user $uid)" >&2
