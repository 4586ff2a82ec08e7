#!/usr/bin/env bash
# Builds local sandbox images for a Nomad that cannot pull (make run-nomad,
# the end-to-end suite): busybox FROM scratch, from Debian's busybox-static
# (seconds), and a real Debian 12 root filesystem made by debootstrap from
# the machine's configured Debian mirror (about 2 minutes). An image already
# present under its tag is reused as it is. Needs root (apt-get) and Docker.
#   build.sh busybox=TAG [debian=TAG]
set -euo pipefail
busybox_tag='' debian_tag=''
for arg in "$@"; do
	case $arg in
	busybox=?*) busybox_tag=${arg#busybox=} ;;
	debian=?*) debian_tag=${arg#debian=} ;;
	*) echo "usage: $0 busybox=TAG [debian=TAG]" >&2; exit 2 ;;
	esac
done
export DEBIAN_FRONTEND=noninteractive

have() { docker image inspect "$1" >/dev/null 2>&1; }
apt_install() {
	local missing=()
	for p in "$@"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
	[ ${#missing[@]} -eq 0 ] && return 0
	apt-get update -qq && apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

if [ -n "$busybox_tag" ] && ! have "$busybox_tag"; then
	apt_install busybox-static
	mkdir -p "$work/bb/bin" "$work/bb/tmp" "$work/bb/workspace" "$work/bb/proc" "$work/bb/dev" "$work/bb/sys" "$work/bb/etc"
	cp /bin/busybox "$work/bb/bin/busybox"
	for applet in $("$work/bb/bin/busybox" --list); do
		[ "$applet" = busybox ] || ln -s busybox "$work/bb/bin/$applet"
	done
	echo 'root:x:0:0:root:/root:/bin/sh' > "$work/bb/etc/passwd"
	echo 'root:x:0:' > "$work/bb/etc/group"
	cat > "$work/bb/Dockerfile" <<'DOCKERFILE'
FROM scratch
COPY . /
ENV PATH=/bin
CMD ["/bin/sh"]
DOCKERFILE
	docker build -q -t "$busybox_tag" "$work/bb" >/dev/null
	echo "built $busybox_tag" >&2
fi

if [ -n "$debian_tag" ] && ! have "$debian_tag"; then
	apt_install debootstrap
	mirror=$(awk '/^URIs:/ {print $2; exit}' /etc/apt/sources.list.d/debian.sources 2>/dev/null || true)
	[ -n "$mirror" ] || mirror=$(awk '/^deb / {print $2; exit}' /etc/apt/sources.list 2>/dev/null || true)
	[ -n "$mirror" ] || mirror=http://deb.debian.org/debian
	debootstrap --variant=minbase bookworm "$work/deb" "$mirror" >"$work/debootstrap.log" 2>&1 ||
		{ tail -20 "$work/debootstrap.log" >&2; exit 1; }
	mkdir -p "$work/deb/workspace"
	tar -C "$work/deb" -c . | docker import -c 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' -c 'CMD ["/bin/bash"]' - "$debian_tag" >/dev/null
	echo "built $debian_tag" >&2
fi
