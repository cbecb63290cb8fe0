#!/usr/bin/env bash
# Best effort, offline: install Chromium from the apt cache so that
# tests/profile/test_html_screenshot.py can screenshot the roofline page (it skips without a browser).
#
#     bash scripts/install_chromium.sh
#
# If a Chromium or Chrome binary is on PATH, it does nothing. Otherwise it asks apt which packages
# `apt-get install --no-install-recommends chromium` would install (-s: a simulation, no download) and,
# only if every one of their .debs is in the apt cache (APT_ARCHIVES, default /var/cache/apt/archives),
# installs them with `dpkg -i` (as root, or through sudo -n). It never touches the network.
# Always exits 0, printing one line that says what it did.
set -uo pipefail

say() { echo "install_chromium: $*"; exit 0; }

for b in chromium chromium-browser google-chrome google-chrome-stable chrome; do
    if command -v "$b" >/dev/null 2>&1; then say "nothing to do: $(command -v "$b") is on PATH"; fi
done
command -v apt-get >/dev/null 2>&1 && command -v dpkg >/dev/null 2>&1 || say "skipped: no apt-get/dpkg here"

cache="${APT_ARCHIVES:-/var/cache/apt/archives}"
plan=$(apt-get install -s --no-install-recommends chromium 2>/dev/null) || say "skipped: apt knows no chromium package"
# "Inst NAME [OLD] (VERSION ORIGIN [ARCH])" -> NAME VERSION ARCH
mapfile -t pkgs < <(printf '%s\n' "$plan" | sed -nE 's/^Inst ([^ ]+) (\[[^]]*\] )?\(([^ ]+) .*\[([^]]+)\]\)$/\1 \3 \4/p')
[ "${#pkgs[@]}" -gt 0 ] || say "skipped: apt plans to install nothing for chromium, yet no browser is on PATH"

debs=()
missing=()
for p in "${pkgs[@]}"; do
    read -r name version arch <<<"$p"
    deb="$cache/${name}_${version//:/%3a}_${arch}.deb"
    if [ -f "$deb" ]; then debs+=("$deb"); else missing+=("$name"); fi
done
[ "${#missing[@]}" -eq 0 ] || say "skipped: ${#missing[@]} of ${#pkgs[@]} packages not in $cache (${missing[*]:0:5}...)"

if [ "$(id -u)" -eq 0 ]; then sudo=(); elif sudo -n true 2>/dev/null; then sudo=(sudo -n); else
    say "skipped: all ${#debs[@]} packages are cached, but installing needs root (run it as root)"; fi
if "${sudo[@]}" dpkg -i "${debs[@]}" >/tmp/install_chromium.log 2>&1 && command -v chromium >/dev/null 2>&1; then
    say "installed chromium and ${#debs[@]} cached packages with dpkg -i ($(command -v chromium))"
fi
say "failed: dpkg -i of ${#debs[@]} cached packages did not give a chromium binary (see /tmp/install_chromium.log)"
