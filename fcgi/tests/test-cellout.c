/*
 * Unit tests for cellout.c and notebook.c: a cell's JSON from an untrusted program, checked and
 * rebuilt (only nbformat 4's shapes pass), the fallback from the cell's output, and the
 * notebook file rendered as nbformat 4.5.
 */
#include <fcntl.h>
#include <jansson.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/cellout.h"
#include "core/notebook.h"
#include "tap.h"

/* cellout_render(json) wrapped back into an object, parsed */
static json_t *
render(const char *json, const char *out, const char *err, const char *note)
{
	size_t len = 0;
	char *s = cellout_render(json, json ? strlen(json) : 0, out, out ? strlen(out) : 0, err,
	                         err ? strlen(err) : 0, note, &len);
	char *doc = NULL;
	json_t *j = NULL;

	if (s != NULL && asprintf(&doc, "{%s}", s) >= 0)
		j = json_loads(doc, 0, NULL);
	free(s);
	free(doc);
	return j;
}

static const char *
type_at(json_t *doc, size_t i)
{
	return json_string_value(
	    json_object_get(json_array_get(json_object_get(doc, "outputs"), i), "output_type"));
}

static void
test_good(void)
{
	json_t *d = render(
	    "{\"executionCount\":3,\"outputs\":[{\"output_type\":\"stream\",\"name\":\"stdout\","
	    "\"text\":\"1\\n\"},{\"output_type\":\"display_data\",\"data\":{\"text/plain\":\"x\","
	    "\"text/html\":\"<b>x</b>\",\"application/json\":{\"a\":[1]}},\"metadata\":{}},"
	    "{\"output_type\":\"execute_result\",\"execution_count\":3,\"data\":{\"text/plain\":"
	    "\"2\"},\"metadata\":{}},{\"output_type\":\"error\",\"ename\":\"E\",\"evalue\":\"v\","
	    "\"traceback\":[\"a\",\"b\"]}],\"error\":{\"name\":\"E\",\"value\":\"v\","
	    "\"traceback\":[\"a\",\"b\"]}}",
	    NULL, NULL, NULL);

	ok(d != NULL, "a well-formed cell renders");
	ok(json_integer_value(json_object_get(d, "executionCount")) == 3, "its count");
	ok(json_array_size(json_object_get(d, "outputs")) == 4, "its four outputs, in order");
	is_str(type_at(d, 0), "stream", "stream first");
	is_str(type_at(d, 3), "error", "error last");
	ok(json_is_object(json_object_get(
	       json_object_get(json_array_get(json_object_get(d, "outputs"), 1), "data"),
	       "application/json")),
	   "application/json stays JSON");
	is_str(json_string_value(json_object_get(json_object_get(d, "error"), "name")), "E",
	       "error.name");
	json_decref(d);
}

static void
test_hostile(void)
{
	/* unknown types, wrong shapes, another stream name, extra keys, a bad MIME type */
	json_t *d = render(
	    "{\"executionCount\":1,\"outputs\":[{\"output_type\":\"stream\",\"name\":\"stdin\","
	    "\"text\":\"x\"},{\"output_type\":\"stream\",\"name\":\"stdout\",\"text\":[\"a\"]},"
	    "{\"output_type\":\"evil\"},7,\"s\",{\"output_type\":\"display_data\",\"data\":"
	    "{\"Text/HTML\":\"x\",\"text/plain\":5,\"image/png\":\"AA==\",\"../x\":\"y\"},"
	    "\"metadata\":[],\"extra\":1},{\"output_type\":\"error\",\"ename\":\"E\","
	    "\"evalue\":\"v\",\"traceback\":\"not a list\"}],\"error\":{\"name\":1}}",
	    NULL, NULL, NULL);
	json_t *o, *data;

	ok(d != NULL, "a hostile cell still renders");
	ok(json_array_size(json_object_get(d, "outputs")) == 1,
	   "only the one valid output is kept");
	o = json_array_get(json_object_get(d, "outputs"), 0);
	data = json_object_get(o, "data");
	ok(json_object_size(data) == 1 && json_object_get(data, "image/png") != NULL,
	   "its bundle keeps only the well-formed type");
	ok(json_is_object(json_object_get(o, "metadata")) && json_object_get(o, "extra") == NULL,
	   "metadata made an object, extra keys left out");
	ok(json_is_null(json_object_get(d, "error")), "a malformed error is null");
	json_decref(d);

	d = render("{\"executionCount\":0,\"outputs\":[]}", "out", "err", "note\n");
	ok(d != NULL && json_is_null(json_object_get(d, "executionCount")),
	   "a count below 1: the fallback");
	json_decref(d);
	d = render("{\"executionCount\":1,\"executionCount\":2,\"outputs\":[]}", NULL, NULL, NULL);
	ok(d != NULL && json_is_null(json_object_get(d, "executionCount")),
	   "duplicate keys: the fallback");
	json_decref(d);
	d = render("[[[[", NULL, NULL, NULL);
	ok(d != NULL && json_array_size(json_object_get(d, "outputs")) == 0,
	   "garbage: no outputs, still JSON");
	json_decref(d);
}

static void
test_fallback(void)
{
	json_t *d = render(NULL, "a\n", "b\n", "codebox: note\n");

	ok(d != NULL, "no JSON: made from the output");
	ok(json_is_null(json_object_get(d, "executionCount")), "count null");
	ok(json_array_size(json_object_get(d, "outputs")) == 3, "stdout, stderr and the note");
	is_str(json_string_value(
	           json_object_get(json_array_get(json_object_get(d, "outputs"), 0), "name")),
	       "stdout", "stdout first");
	json_decref(d);
	d = render(NULL, NULL, NULL, NULL);
	ok(d != NULL && json_array_size(json_object_get(d, "outputs")) == 0, "nothing at all");
	json_decref(d);
}

static void
test_mime(void)
{
	ok(cellout_mime_ok("text/plain", 10), "text/plain");
	ok(cellout_mime_ok("application/vnd.a+json", 22), "a vendor type");
	ok(!cellout_mime_ok("text", 4), "no subtype");
	ok(!cellout_mime_ok("/plain", 6), "no type");
	ok(!cellout_mime_ok("text/", 5), "empty subtype");
	ok(!cellout_mime_ok("a/b/c", 5), "two slashes");
	ok(!cellout_mime_ok("Text/plain", 10), "upper case");
	ok(!cellout_mime_ok("../x", 4), "a path");
	ok(!cellout_mime_ok("text/.x", 7), "a subtype of a dot");
}

static void
test_notebook(void)
{
	char dir[] = "/tmp/codebox-test-nb.XXXXXX";
	size_t len = 0, dl = 0;
	char *doc, *nb;
	json_t *j, *cells;
	int dfd;

	ok(mkdtemp(dir) != NULL, "a temp dir");
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	nb = notebook_render(dfd, "x.cells", "3.11.2", &len);
	j = nb ? json_loads(nb, 0, NULL) : NULL;
	ok(j != NULL && json_array_size(json_object_get(j, "cells")) == 0,
	   "no file yet: a notebook of no cell");
	ok(json_integer_value(json_object_get(j, "nbformat")) == 4, "nbformat 4");
	json_decref(j);
	free(nb);
	const char *cell = "{\"executionCount\":1,\"outputs\":[],\"error\":null}";
	doc = cellout_render(cell, strlen(cell), NULL, 0, NULL, 0, NULL, &dl);
	ok(notebook_append(dfd, "x.cells", "x = 1\n\xff", 7, doc, dl) == 0, "a cell appended");
	ok(notebook_append(dfd, "x.cells", "y", 1, NULL, 0) == 0, "a cell without outputs");
	free(doc);
	nb = notebook_render(dfd, "x.cells", "3.11.2", &len);
	j = nb ? json_loads(nb, 0, NULL) : NULL;
	cells = json_object_get(j, "cells");
	ok(json_array_size(cells) == 2, "two cells");
	is_str(json_string_value(json_object_get(json_array_get(cells, 0), "id")), "cell-1",
	       "cell ids");
	is_str(json_string_value(json_object_get(json_array_get(cells, 0), "source")),
	       "x = 1\n\xef\xbf\xbd", "its code, made valid UTF-8");
	ok(json_integer_value(json_object_get(json_array_get(cells, 0), "execution_count")) == 1,
	   "its count");
	ok(json_array_size(json_object_get(json_array_get(cells, 1), "outputs")) == 1,
	   "a cell without outputs says why");
	json_decref(j);
	free(nb);
	(void)unlinkat(dfd, "x.cells", 0);
	close(dfd);
	rmdir(dir);
}

int
main(void)
{
	test_good();
	test_hostile();
	test_fallback();
	test_mime();
	test_notebook();
	return tap_done();
}
