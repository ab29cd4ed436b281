// A capstan tool in C: `wc` counts the lines, words and bytes of a
// workspace file. Bindings: wit-bindgen c (gen/tool_plugin.h).
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <errno.h>
#include "gen/tool_plugin.h"

static void set_error(exports_capstan_plugin_tool_tool_error_t *err, uint8_t tag, const char *msg) {
  err->tag = tag;
  tool_plugin_string_dup(&err->val.failed, msg);
}

// The string value of field `key` in a flat JSON object, or NULL.
static char *json_string_field(const uint8_t *json, size_t len, const char *key) {
  char *text = strndup((const char *)json, len);
  char pattern[64];
  snprintf(pattern, sizeof pattern, "\"%s\"", key);
  char *at = strstr(text, pattern);
  char *out = NULL;
  if (at) {
    at += strlen(pattern);
    while (*at == ' ' || *at == '\t' || *at == '\n') at++;
    if (*at == ':') {
      at++;
      while (*at == ' ' || *at == '\t' || *at == '\n') at++;
      if (*at == '"') {
        at++;
        out = malloc(strlen(at) + 1);
        size_t n = 0;
        while (*at && *at != '"') {
          if (*at == '\\' && at[1]) at++;
          out[n++] = *at++;
        }
        out[n] = 0;
        if (*at != '"') { free(out); out = NULL; }
      }
    }
  }
  free(text);
  return out;
}

void exports_capstan_plugin_tool_describe(exports_capstan_plugin_tool_list_tool_spec_t *ret) {
  ret->len = 1;
  ret->ptr = calloc(1, sizeof(exports_capstan_plugin_tool_tool_spec_t));
  tool_plugin_string_dup(&ret->ptr[0].name, "wc");
  tool_plugin_string_dup(&ret->ptr[0].description, "Counts the lines, words and bytes of a file in the workspace.");
  tool_plugin_string_dup(&ret->ptr[0].input_schema,
    "{\"type\":\"object\",\"properties\":{\"path\":{\"type\":\"string\",\"description\":\"A file, relative to the workspace.\"}},\"required\":[\"path\"],\"additionalProperties\":false}");
  ret->ptr[0].hints = EXPORTS_CAPSTAN_PLUGIN_TOOL_TOOL_HINTS_READ_ONLY;
}

bool exports_capstan_plugin_tool_call(tool_plugin_string_t *name, tool_plugin_string_t *input,
    exports_capstan_plugin_tool_call_context_t *ctx,
    exports_capstan_plugin_tool_tool_output_t *ret, exports_capstan_plugin_tool_tool_error_t *err) {
  char *path = json_string_field(input->ptr, input->len, "path");
  if (!path) {
    set_error(err, EXPORTS_CAPSTAN_PLUGIN_TOOL_TOOL_ERROR_INVALID_INPUT, "missing field `path` (a string)");
    return false;
  }
  if (!ctx->workspace.is_some) {
    free(path);
    set_error(err, EXPORTS_CAPSTAN_PLUGIN_TOOL_TOOL_ERROR_DENIED, "this call was not granted the workspace");
    return false;
  }
  char full[4096];
  snprintf(full, sizeof full, "%.*s/%s", (int)ctx->workspace.val.len, (const char *)ctx->workspace.val.ptr, path);
  FILE *f = fopen(full, "rb");
  if (!f) {
    char msg[4200];
    snprintf(msg, sizeof msg, "%s: %s", path, strerror(errno));
    set_error(err, errno == ENOENT ? EXPORTS_CAPSTAN_PLUGIN_TOOL_TOOL_ERROR_FAILED : EXPORTS_CAPSTAN_PLUGIN_TOOL_TOOL_ERROR_DENIED, msg);
    free(path);
    return false;
  }
  long lines = 0, words = 0, bytes = 0;
  int c, in_word = 0;
  while ((c = fgetc(f)) != EOF) {
    bytes++;
    if (c == '\n') lines++;
    int space = c == ' ' || c == '\n' || c == '\t' || c == '\r';
    if (!space && !in_word) words++;
    in_word = !space;
  }
  fclose(f);
  char out[256];
  snprintf(out, sizeof out, "{\"lines\":%ld,\"words\":%ld,\"bytes\":%ld}", lines, words, bytes);
  free(path);
  ret->content.len = 1;
  ret->content.ptr = calloc(1, sizeof(exports_capstan_plugin_tool_content_t));
  ret->content.ptr[0].tag = EXPORTS_CAPSTAN_PLUGIN_TOOL_CONTENT_JSON;
  tool_plugin_string_dup(&ret->content.ptr[0].val.json, out);
  return true;
}
