#!/usr/bin/env bash
# Builds codebox's nginx module (nginx/module) as a dynamic module for the nginx installed
# here, from Debian's nginx-dev: the headers and configure script of that same nginx, with the
# flags it was built with (a module must match its nginx's version and signature).
#   usage: scripts/build-nginx-module.sh OUT_DIR
# Leaves OUT_DIR/ngx_http_codebox_module.so. nginx's configure runs once per OUT_DIR (about
# 10 s); later builds recompile the module only.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
out=${1:?usage: $0 OUT_DIR}
src=${NGINX_DEV_SRC:-/usr/share/nginx/src}

if [[ ! -f $src/conf_flags || ! -x $src/configure ]]; then
	echo "build-nginx-module: no nginx sources at $src (Debian's nginx-dev; scripts/install-deps.sh installs it)" >&2
	exit 1
fi

# a module loads only into the nginx it was built against: refuse a mismatch plainly
nginx_bin=${NGINX:-/usr/sbin/nginx}
have=""
# (an image's build stage has the sources alone: its nginx is the final stage's)
if [[ -x $nginx_bin ]]; then
	have=$("$nginx_bin" -v 2>&1 | sed -n 's|^nginx version: nginx/\([0-9.]*\).*|\1|p' || true)
fi
dev=$(sed -n 's|^#define NGINX_VERSION *"\([0-9.]*\)"|\1|p' "$src/src/core/nginx.h" 2>/dev/null || true)
if [[ -n $have && -n $dev && $have != "$dev" ]]; then
	echo "build-nginx-module: nginx $have is installed but nginx-dev holds $dev's sources; the" \
		"module would not load (apt-get install nginx-dev, or scripts/install-deps.sh, brings" \
		"the matching one)" >&2
	exit 1
fi

mkdir -p "$out"
tree="$out/src"
# configure again when nginx-dev changed (a new nginx) or the module's build description did
stamp="$(stat -c %Y "$src/conf_flags") $(sha256sum "$here/nginx/module/config" | cut -d' ' -f1)"
if [[ ! -f $tree/objs/Makefile || $(cat "$tree/.codebox-stamp" 2>/dev/null) != "$stamp" ]]; then
	rm -rf "$tree"
	cp -a "$src" "$tree"
	# shellcheck source=/dev/null # Debian's file: NGX_CONF_FLAGS=( ...the flags nginx was built with... )
	. "$src/conf_flags"
	(cd "$tree" && ./configure "${NGX_CONF_FLAGS[@]}" --add-dynamic-module="$here/nginx/module") \
		>"$out/configure.log" 2>&1 || {
		tail -n 20 "$out/configure.log" >&2
		echo "build-nginx-module: nginx's configure failed (log: $out/configure.log)" >&2
		exit 1
	}
	echo "$stamp" >"$tree/.codebox-stamp"
fi
make -s -C "$tree" -f objs/Makefile modules
install -m 0644 "$tree/objs/ngx_http_codebox_module.so" "$out/ngx_http_codebox_module.so"
