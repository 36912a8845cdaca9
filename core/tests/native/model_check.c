/* Whole-model check through the C ABI: load an ONNX model, feed the stored inputs, compare every
 * output with the stored expectation (computed by onnx's reference evaluator, see
 * make_model_data.py). Runs natively and under qemu/wine in `nox -s crosscheck`.
 *
 * Usage: model_check <case file>...      (e.g. data/mlp.case; paths inside are relative to it)
 * Case file lines:
 *   model <file.onnx>
 *   input  <name> <elem type> <rank> <dims...> <file.bin>
 *   output <name> <elem type> <rank> <dims...> <file.bin> <tolerance>
 * Prints "model <name>: <n> outputs OK" per passing case; exits non-zero on any mismatch. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mosaicrt/mosaicrt.h"

#define MAX_IO 8
#define MAX_RANK 8
#define MAX_PATH_LEN 1024

typedef struct {
  char name[128];
  int32_t elem_type;
  size_t rank;
  int64_t dims[MAX_RANK];
  char file[MAX_PATH_LEN];
  double tolerance;
  void* data;
  size_t bytes;
} Io;

static size_t elem_size(int32_t t) {
  switch (t) {
    case 1: case 6: return 4;  /* float, int32 */
    case 2: case 3: case 9: return 1;  /* uint8, int8, bool */
    case 7: case 11: return 8;  /* int64, double */
    default: return 0;
  }
}

static void join_dir(char* out, const char* case_path, const char* file) {
  const char* slash = strrchr(case_path, '/');
  const char* bslash = strrchr(case_path, '\\');
  if (bslash && (!slash || bslash > slash)) slash = bslash;
  size_t n = slash ? (size_t)(slash - case_path + 1) : 0;
  if (n + strlen(file) + 1 > MAX_PATH_LEN) n = 0;
  memcpy(out, case_path, n);
  strcpy(out + n, file);
}

static void* read_file(const char* path, size_t* size) {
  FILE* f = fopen(path, "rb");
  if (!f) return NULL;
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  void* buf = malloc(n > 0 ? (size_t)n : 1);
  if (buf && n > 0 && fread(buf, 1, (size_t)n, f) != (size_t)n) {
    free(buf);
    buf = NULL;
  }
  fclose(f);
  *size = n > 0 ? (size_t)n : 0;
  return buf;
}

/* Parses "<name> <type> <rank> <dims...> <file> [tolerance]" after the keyword. */
static int parse_io(char* rest, const char* case_path, Io* io, int with_tol) {
  char* tok = strtok(rest, " \t\r\n");
  if (!tok) return 0;
  snprintf(io->name, sizeof(io->name), "%s", tok);
  if (!(tok = strtok(NULL, " \t\r\n"))) return 0;
  io->elem_type = (int32_t)atoi(tok);
  if (!(tok = strtok(NULL, " \t\r\n"))) return 0;
  io->rank = (size_t)atoi(tok);
  if (io->rank > MAX_RANK) return 0;
  for (size_t i = 0; i < io->rank; ++i) {
    if (!(tok = strtok(NULL, " \t\r\n"))) return 0;
    io->dims[i] = atoll(tok);
  }
  if (!(tok = strtok(NULL, " \t\r\n"))) return 0;
  join_dir(io->file, case_path, tok);
  io->tolerance = 0.0;
  if (with_tol) {
    if (!(tok = strtok(NULL, " \t\r\n"))) return 0;
    io->tolerance = atof(tok);
  }
  io->data = read_file(io->file, &io->bytes);
  if (!io->data) {
    fprintf(stderr, "FAIL cannot read %s\n", io->file);
    return 0;
  }
  size_t want = elem_size(io->elem_type);
  for (size_t i = 0; i < io->rank; ++i) want *= (size_t)io->dims[i];
  if (want != io->bytes || elem_size(io->elem_type) == 0) {
    fprintf(stderr, "FAIL %s holds %zu bytes, shape/type says %zu\n", io->file, io->bytes, want);
    return 0;
  }
  return 1;
}

static int fail_status(MrtStatus* st, const char* what, const char* case_path) {
  if (!st) return 0;
  fprintf(stderr, "FAIL %s: %s: [%d] %s\n", case_path, what, (int)MrtStatusGetCode(st), MrtStatusGetMessage(st));
  MrtReleaseStatus(st);
  return 1;
}

static int compare(const Io* want, const MrtValue* got, const char* case_path) {
  int32_t type = 0;
  size_t rank = 0, bytes = 0;
  const int64_t* shape = NULL;
  const void* data = NULL;
  if (fail_status(MrtValueGetInfo(got, &type, &rank, &shape, &data, &bytes), "output info", case_path)) return 1;
  if (type != want->elem_type || rank != want->rank || bytes != want->bytes) {
    fprintf(stderr, "FAIL %s: output %s is type %d rank %zu (%zu bytes), expected type %d rank %zu (%zu bytes)\n",
            case_path, want->name, (int)type, rank, bytes, (int)want->elem_type, want->rank, want->bytes);
    return 1;
  }
  for (size_t i = 0; i < rank; ++i)
    if (shape[i] != want->dims[i]) {
      fprintf(stderr, "FAIL %s: output %s dim %zu is %lld, expected %lld\n", case_path, want->name, i,
              (long long)shape[i], (long long)want->dims[i]);
      return 1;
    }
  if (type == 1) {
    const float* g = (const float*)data;
    const float* e = (const float*)want->data;
    size_t n = bytes / 4, bad = 0;
    double worst = 0.0;
    for (size_t i = 0; i < n; ++i) {
      double err = fabs((double)g[i] - (double)e[i]);
      double limit = want->tolerance * (1.0 + fabs((double)e[i]));
      if (!(err <= limit)) {  /* also catches NaN */
        if (bad++ < 3)
          fprintf(stderr, "FAIL %s: %s[%zu] = %.9g, expected %.9g (|err| %.3g > %.3g)\n", case_path, want->name, i,
                  g[i], e[i], err, limit);
      }
      if (err > worst) worst = err;
    }
    if (bad) return 1;
    printf("  %s: %zu values, max |err| %.3g\n", want->name, n, worst);
    return 0;
  }
  if (memcmp(data, want->data, bytes) != 0) {
    fprintf(stderr, "FAIL %s: output %s differs from the expected bytes\n", case_path, want->name);
    return 1;
  }
  return 0;
}

static int run_case(const char* case_path) {
  size_t size = 0;
  char* text = (char*)read_file(case_path, &size);
  if (!text) {
    fprintf(stderr, "FAIL cannot read case file %s\n", case_path);
    return 1;
  }
  text = (char*)realloc(text, size + 1);
  text[size] = '\0';
  char model[MAX_PATH_LEN] = "";
  Io ins[MAX_IO], outs[MAX_IO];
  size_t n_in = 0, n_out = 0;
  int failed = 0;
  char* save = text;
  for (char* line = save; line && *line && !failed;) {
    char* next = strchr(line, '\n');
    if (next) *next++ = '\0';
    if (strncmp(line, "model ", 6) == 0) {
      char* name = strtok(line + 6, " \t\r\n");
      if (name) join_dir(model, case_path, name);
    } else if (strncmp(line, "input ", 6) == 0 && n_in < MAX_IO) {
      failed = !parse_io(line + 6, case_path, &ins[n_in++], 0);
    } else if (strncmp(line, "output ", 7) == 0 && n_out < MAX_IO) {
      failed = !parse_io(line + 7, case_path, &outs[n_out++], 1);
    }
    line = next;
  }
  free(text);
  if (failed || !model[0] || n_out == 0) {
    fprintf(stderr, "FAIL %s: malformed case file\n", case_path);
    return 1;
  }

  MrtSessionOptions* opts = NULL;
  MrtSession* sess = NULL;
  MrtValue* in_values[MAX_IO] = {0};
  MrtValue* out_values[MAX_IO] = {0};
  const char* in_names[MAX_IO];
  const char* out_names[MAX_IO];
  failed = fail_status(MrtCreateSessionOptions(&opts), "session options", case_path);
  if (!failed) failed = fail_status(MrtSessionOptionsSetIntraOpNumThreads(opts, 2), "threads", case_path);
  if (!failed) failed = fail_status(MrtCreateSession(model, opts, &sess), "create session", case_path);
  for (size_t i = 0; i < n_in && !failed; ++i) {
    in_names[i] = ins[i].name;
    failed = fail_status(MrtCreateTensor(ins[i].elem_type, ins[i].dims, ins[i].rank, ins[i].data, ins[i].bytes,
                                         &in_values[i]),
                         "create input", case_path);
  }
  for (size_t i = 0; i < n_out; ++i) out_names[i] = outs[i].name;
  if (!failed)
    failed = fail_status(MrtRun(sess, in_names, (const MrtValue* const*)in_values, n_in, out_names, n_out, out_values),
                         "run", case_path);
  for (size_t i = 0; i < n_out && !failed; ++i) failed |= compare(&outs[i], out_values[i], case_path);
  if (!failed) printf("model %s: %zu outputs OK\n", model, n_out);

  for (size_t i = 0; i < MAX_IO; ++i) {
    if (in_values[i]) MrtReleaseValue(in_values[i]);
    if (out_values[i]) MrtReleaseValue(out_values[i]);
  }
  for (size_t i = 0; i < n_in; ++i) free(ins[i].data);
  for (size_t i = 0; i < n_out; ++i) free(outs[i].data);
  if (sess) MrtReleaseSession(sess);
  if (opts) MrtReleaseSessionOptions(opts);
  return failed;
}

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s <case file>...\n", argv[0]);
    return 2;
  }
  printf("mosaicrt %s (%s)\n", MrtGetVersionString(), MrtGetBuildInfo());
  int failures = 0;
  for (int i = 1; i < argc; ++i) failures += run_case(argv[i]);
  printf(failures ? "FAILED: %d of %d models\n" : "OK: %d failures in %d models\n", failures, argc - 1);
  return failures ? 1 : 0;
}
