#!/bin/bash
# codebox: fcgi/'s folders are its processes, from the top down (the Makefile's LAYERS): a file
# includes headers of its own folder and of the folders below it, always named from fcgi/
# ("core/log.h"), never one of a folder above it. Exit 0 when every include keeps to it; else 1,
# with each include that does not.
# Usage: check-layers.sh [FCGI_DIR [LAYER...]]   (default: fcgi, and the folders from the top down)
set -euo pipefail

dir=${1:-fcgi}
layers=(pool http run warm box core)
if (($# > 1)); then
	layers=("${@:2}")
fi

# each folder's rank, from 0 at the top
declare -A rank
for i in "${!layers[@]}"; do
	rank[${layers[i]}]=$i
done

bad=0
for d in "${layers[@]}"; do
	own=${rank[$d]}
	files=("$dir/$d"/*.[ch])
	[[ -e ${files[0]} ]] || continue
	while IFS=: read -r f line path; do
		folder=${path%%/*}
		if [[ $folder == "$path" ]]; then
			echo "$f:$line: \"$path\" names no folder (include it as \"FOLDER/$path\")"
			bad=1
			continue
		fi
		r=${rank[$folder]:--1}
		if ((r < 0)); then
			echo "$f:$line: \"$path\": $folder/ is no folder of fcgi/ (${layers[*]})"
			bad=1
		elif ((r < own)); then
			echo "$f:$line: \"$path\": $d/ includes $folder/, a folder above it"
			bad=1
		fi
	done < <(grep -H -n -oP '^\s*#\s*include\s+"\K[^"]+' "${files[@]}" || true)
done
# every source is in one of the folders
for f in "$dir"/*.[ch]; do
	[[ -e $f ]] || continue
	echo "$f: in none of fcgi/'s folders (${layers[*]})"
	bad=1
done
exit "$bad"
