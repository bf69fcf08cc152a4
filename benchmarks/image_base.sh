#!/bin/sh
# Builds a stand-in for python:3.11-slim from Debian's own packages, for machines that reach
# Debian's mirror and PyPI but not Docker Hub (benchmarks/IMAGE.md says how it differs).
#   sudo sh benchmarks/image_base.sh [tag]        (default tag: imreview-base:bookworm)
# Then: docker build --build-arg BASE_IMAGE=imreview-base:bookworm .
# Needs root, debootstrap and a running dockerd.
set -eu
tag="${1:-imreview-base:bookworm}"
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
root="$work/rootfs"

debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates,netbase,tzdata \
    bookworm "$root" "$mirror"

# What debian:bookworm-slim leaves out (docs, man pages, locales), also for packages added later.
cat > "$root/etc/dpkg/dpkg.cfg.d/docker-slim" <<'CFG'
path-exclude /usr/share/doc/*
path-include /usr/share/doc/*/copyright
path-exclude /usr/share/man/*
path-exclude /usr/share/groff/*
path-exclude /usr/share/info/*
path-exclude /usr/share/lintian/*
path-exclude /usr/share/linda/*
path-exclude /usr/share/locale/*
path-include /usr/share/locale/locale.alias
CFG
find "$root/usr/share/doc" -mindepth 2 ! -name copyright ! -type d -delete
find "$root/usr/share/doc" -type d -empty -delete
rm -rf "$root"/usr/share/man/* "$root"/usr/share/info/* "$root"/usr/share/lintian/* "$root"/usr/share/groff/*
find "$root/usr/share/locale" -mindepth 1 ! -name locale.alias -delete
# debian:bookworm-slim's apt settings: downloaded packages are deleted after each install.
cat > "$root/etc/apt/apt.conf.d/docker-clean" <<'CFG'
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
APT::Update::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb /var/cache/apt/*.bin || true"; };
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
CFG
printf 'deb %s bookworm main\ndeb %s bookworm-updates main\ndeb %s-security bookworm-security main\n' \
    "$mirror" "$mirror" "$mirror" > "$root/etc/apt/sources.list"

# python:3.11-slim has its interpreter and pip at /usr/local/bin and its site-packages in
# /usr/local/lib/python3.11: a venv rooted at /usr/local gives the same paths (and no PEP 668
# "externally managed" refusal), with Debian's Python 3.11 behind it.
chroot "$root" python3 -m venv /usr/local
# python:3.11-slim deletes the standard library's *.pyc after building Python; so does the stand-in.
find "$root/usr/lib/python3.11" "$root/usr/local/lib/python3.11" -depth -name __pycache__ -type d \
    -exec rm -rf '{}' +
rm -f "$root"/usr/local/bin/activate* "$root"/usr/local/bin/Activate.ps1

# A TLS-inspecting proxy on this machine: its CA (if any) is trusted inside the image, and pip
# is told to use the system bundle instead of its own. Not part of python:3.11-slim.
if ls /usr/local/share/ca-certificates/*.crt >/dev/null 2>&1; then
    cp /usr/local/share/ca-certificates/*.crt "$root/usr/local/share/ca-certificates/"
    chroot "$root" update-ca-certificates >/dev/null
fi
printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$root/etc/pip.conf"

rm -f "$root"/var/cache/apt/archives/*.deb "$root"/var/cache/apt/*.bin
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/log/* "$root"/tmp/*

tar -C "$root" --numeric-owner -c . | docker import \
    --change 'ENV PATH=/usr/local/bin:/usr/local/sbin:/usr/sbin:/usr/bin:/sbin:/bin' \
    --change 'ENV LANG=C.UTF-8' \
    --change 'CMD ["python3"]' \
    - "$tag"
docker image inspect --format '{{.Size}}' "$tag"
