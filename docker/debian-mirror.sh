#!/bin/sh
# Prints the Debian archive debootstrap fetches from: OVERLAP_DEBIAN_MIRROR when it is set,
# else the first Debian archive this machine's apt already uses (one-line sources.list or
# deb822 .sources; the security archive is skipped). The repository names no mirror: a
# machine with neither fails here, saying what to set.
set -eu

if [ -n "${OVERLAP_DEBIAN_MIRROR:-}" ]; then
    echo "$OVERLAP_DEBIAN_MIRROR"
    exit 0
fi
mirror=$(
    {
        cat /etc/apt/sources.list /etc/apt/sources.list.d/*.list 2>/dev/null \
            | awk '$1 == "deb" { for (i = 2; i <= NF; i++) if ($i ~ /^[a-z+]+:\/\//) { print $i; break } }'
        cat /etc/apt/sources.list.d/*.sources 2>/dev/null \
            | awk '$1 == "URIs:" { for (i = 2; i <= NF; i++) print $i }'
    } | grep -v -e '-security' -e '/security' | head -n 1
)
if [ -z "$mirror" ]; then
    echo "debian-mirror.sh: this machine's apt names no Debian archive; set" \
        "OVERLAP_DEBIAN_MIRROR to the one debootstrap should use" >&2
    exit 1
fi
echo "${mirror%/}"
