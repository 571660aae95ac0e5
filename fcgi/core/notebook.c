/*
 * notebook.c - a session as a notebook (notebook.h).
 */
#include "core/notebook.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/jsonw.h"
#include "core/utf8.h"
#include "core/util.h"

/* the line for a cell whose outputs are left out (the notebook's bound) */
static const char omitted[] = ",\"omitted\":true";

int
notebook_append(int dirfd, const char *name, const char *code, size_t code_len, const char *doc,
                size_t doc_len)
{
	struct jsonw w;
	struct stat st;
	char *v, *line;
	size_t n;
	int fd, rc;

	fd = openat(dirfd, name, O_WRONLY | O_CREAT | O_APPEND | O_NOFOLLOW | O_CLOEXEC, 0600);
	if (fd < 0)
		return -1;
	if (fstat(fd, &st) < 0) {
		close(fd);
		return -1;
	}
	v = malloc(code_len * 3 + 1);
	if (v == NULL) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	n = utf8_sanitize((const unsigned char *)code, code_len, v);
	if ((unsigned long long)st.st_size + n + doc_len + 64 > NOTEBOOK_MAX_BYTES)
		doc = NULL; /* its code still fits, or not even that */
	if ((unsigned long long)st.st_size + n * 2 + 64 > NOTEBOOK_MAX_BYTES) {
		free(v);
		close(fd);
		errno = EFBIG;
		return -1;
	}
	jsonw_init(&w);
	jsonw_lit(&w, "{\"source\":");
	jsonw_str(&w, v, n);
	free(v);
	if (doc != NULL) {
		jsonw_lit(&w, ",");
		jsonw_raw(&w, doc, doc_len);
	} else {
		jsonw_raw(&w, omitted, sizeof(omitted) - 1);
	}
	jsonw_lit(&w, "}\n");
	line = jsonw_take(&w, &n);
	if (line == NULL) {
		close(fd);
		errno = ENOMEM;
		return -1;
	}
	rc = util_write_all(fd, line, n);
	free(line);
	if (close(fd) < 0)
		rc = -1;
	return rc;
}

/* nbformat's cell from one line (NULL: not a line of ours) */
static json_t *
cell_of(json_t *line, size_t index)
{
	json_t *src = json_object_get(line, "source");
	json_t *count = json_object_get(line, "executionCount");
	json_t *outputs = json_object_get(line, "outputs");
	char id[32];

	if (!json_is_string(src))
		return NULL;
	snprintf(id, sizeof(id), "cell-%zu", index + 1);
	if (!json_is_array(outputs)) {
		outputs =
		    json_pack("[{s:s,s:s,s:s}]", "output_type", "stream", "name", "stderr", "text",
		              json_is_true(json_object_get(line, "omitted"))
		                  ? "codebox: this cell's outputs are left out: the notebook "
		                    "reached its bound\n"
		                  : "codebox: this cell's outputs are unknown\n");
	} else {
		json_incref(outputs);
	}
	return json_pack("{s:s,s:s,s:{},s:O,s:o,s:o}", "id", id, "cell_type", "code", "metadata",
	                 "source", src, "execution_count",
	                 json_is_integer(count) ? json_incref(count) : json_null(), "outputs",
	                 outputs);
}

/* the cells of the file at fd, at most NOTEBOOK_MAX_CELLS, into cells */
static int
read_cells(int fd, json_t *cells)
{
	struct stat st;
	char *buf, *p, *end;
	ssize_t r;

	if (fstat(fd, &st) < 0)
		return -1;
	if ((unsigned long long)st.st_size > NOTEBOOK_MAX_BYTES + 1024) {
		errno = EFBIG;
		return -1;
	}
	buf = malloc((size_t)st.st_size + 1);
	if (buf == NULL)
		return -1;
	r = util_read_max(fd, buf, (size_t)st.st_size);
	if (r < 0) {
		free(buf);
		return -1;
	}
	buf[r] = '\0';
	for (p = buf; p < buf + r && json_array_size(cells) < NOTEBOOK_MAX_CELLS; p = end + 1) {
		end = memchr(p, '\n', (size_t)(buf + r - p));
		if (end == NULL)
			break; /* a line being written: the next read has it */
		json_t *line = json_loadb(p, (size_t)(end - p), 0, NULL);
		json_t *cell = line ? cell_of(line, json_array_size(cells)) : NULL;
		json_decref(line);
		if (cell != NULL)
			json_array_append_new(cells, cell);
	}
	free(buf);
	return 0;
}

char *
notebook_render(int dirfd, const char *name, const char *python_version, size_t *len)
{
	json_t *cells = json_array(), *nb;
	char *s;
	int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);

	if (cells == NULL)
		return NULL;
	if (fd < 0 && errno != ENOENT) {
		json_decref(cells);
		return NULL;
	}
	if (fd >= 0) {
		int rc = read_cells(fd, cells);
		int e = errno;
		close(fd);
		if (rc < 0) {
			json_decref(cells);
			errno = e;
			return NULL;
		}
	}
	nb = json_pack("{s:o,s:{s:{s:s,s:s,s:s},s:{s:s,s:s,s:s,s:s}},s:i,s:i}", "cells", cells,
	               "metadata", "kernelspec", "name", "python3", "display_name", "Python 3",
	               "language", "python", "language_info", "name", "python", "version",
	               python_version, "mimetype", "text/x-python", "file_extension", ".py",
	               "nbformat", 4, "nbformat_minor", 5);
	if (nb == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	s = json_dumps(nb, JSON_INDENT(1) | JSON_PRESERVE_ORDER);
	json_decref(nb);
	if (s == NULL) {
		errno = ENOMEM;
		return NULL;
	}
	*len = strlen(s);
	return s;
}
