#!/usr/bin/env bash
# report-check.sh FILE.html OUT.png [WIDTHxHEIGHT]
#
# Renders a benchmark report (strait bench ... --report FILE.html) in
# headless Chromium and saves a screenshot, to look at how the page
# renders without a desktop. It first checks that the page is
# self-contained: no scripts, no external style sheets, fonts or images.
# Chromium gets a proxy that does not exist, so anything the page did try
# to fetch would fail and show.
#
# Chromium comes from Debian's package: apt-get install chromium.
set -euo pipefail

if [[ $# -lt 2 || $# -gt 3 ]]; then
	echo "usage: $0 FILE.html OUT.png [WIDTHxHEIGHT (default 1320x2400)]" >&2
	exit 2
fi
page=$1 out=$2 size=${3:-1320x2400}
if [[ ! -f $page ]]; then
	echo "$0: $page: no such file" >&2
	exit 1
fi
if [[ ! $size =~ ^[0-9]+x[0-9]+$ ]]; then
	echo "$0: size $size: want WIDTHxHEIGHT, e.g. 1320x2400" >&2
	exit 2
fi

# Self-contained: nothing that loads from elsewhere.
if grep -qiE '<script|<link[^>]+rel="?stylesheet|@import|url\((["'\'']?)(https?:)?//|(src|href)="(https?:)?//' "$page"; then
	echo "$0: $page loads something from elsewhere (a script, style sheet, font or image):" >&2
	grep -noiE '<script[^>]*>|<link[^>]*>|@import[^;]*|url\([^)]*\)|(src|href)="[^"]*"' "$page" | head -5 >&2
	exit 1
fi

browser=
for b in chromium chromium-browser google-chrome; do
	if command -v "$b" >/dev/null; then
		browser=$b
		break
	fi
done
if [[ -z $browser ]]; then
	echo "$0: no Chromium found: install it (Debian: apt-get install chromium)" >&2
	exit 1
fi

abs=$(cd "$(dirname "$page")" && pwd)/$(basename "$page")
mkdir -p "$(dirname "$out")"
out_abs=$(cd "$(dirname "$out")" && pwd)/$(basename "$out")
rm -f "$out_abs"
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT

# --no-sandbox: Chromium refuses to run as root with its sandbox, and CI
# runs as root. The page is our own file.
timeout 120 "$browser" --headless --no-sandbox --disable-gpu --hide-scrollbars \
	--user-data-dir="$profile" --no-first-run --disable-extensions \
	--proxy-server=http://127.0.0.1:9 --proxy-bypass-list='<-loopback>' \
	--window-size="${size/x/,}" --screenshot="$out_abs" "file://$abs" >/dev/null 2>&1 || true

if [[ ! -s $out_abs ]]; then
	echo "$0: $browser wrote no screenshot of $page" >&2
	exit 1
fi
echo "$out"
