/* The C API from C: compiling this file as C99 proves c_api.h is C-clean. Round trip (create,
 * copy in, invoke add, copy out), error reporting through pmx_last_error, views, an engine
 * callback pushed on vars (success and an asynchronous failure surfacing at the wait), and the
 * profiler. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pymx/c_api.h"

static int failures = 0;

#define EXPECT(cond, ...)                                          \
  do {                                                             \
    if (!(cond)) {                                                 \
      ++failures;                                                  \
      fprintf(stderr, "%s:%d: FAILED %s: ", __FILE__, __LINE__, #cond); \
      fprintf(stderr, __VA_ARGS__);                                \
      fprintf(stderr, "\n");                                       \
    }                                                              \
  } while (0)

/* A call that must succeed; prints the C API's message otherwise. */
#define OK(call)                                                                  \
  do {                                                                            \
    int rc_ = (call);                                                             \
    EXPECT(rc_ == PMX_OK, "%s returned %d: %s", #call, rc_, pmx_last_error());    \
  } while (0)

static PmxArray* make_vector(const float* values, int64_t n) {
  PmxArray* array = NULL;
  OK(pmx_array_create(&n, 1, PMX_FLOAT32, PMX_DEVICE_CPU, 0, &array));
  OK(pmx_array_copy_from_cpu(array, values, (size_t)n * sizeof(float)));
  return array;
}

static void test_version(void) {
  int major = -1, minor = -1;
  OK(pmx_api_version(&major, &minor));
  EXPECT(major == PMX_API_VERSION_MAJOR && minor == PMX_API_VERSION_MINOR, "version %d.%d", major,
         minor);
}

static void test_round_trip_add(void) {
  const float a_values[4] = {1.f, 2.f, 3.f, 4.f};
  const float b_values[4] = {10.f, 20.f, 30.f, 40.f};
  PmxArray* inputs[2];
  PmxOp* add = NULL;
  PmxArray** outputs = NULL;
  int num_outputs = 0, ndim = 0, dtype = -1, device_type = 0, device_id = -1;
  const int64_t* shape = NULL;
  float result[4] = {0};
  int i;

  inputs[0] = make_vector(a_values, 4);
  inputs[1] = make_vector(b_values, 4);
  OK(pmx_op_find("add", &add));
  OK(pmx_op_invoke(add, 2, inputs, 0, NULL, NULL, PMX_DEVICE_CPU, 0, 0, NULL, &num_outputs,
                   &outputs));
  EXPECT(num_outputs == 1, "add gave %d outputs", num_outputs);
  if (num_outputs != 1) return;
  {
    PmxArray* sum = outputs[0]; /* ours now */
    OK(pmx_array_shape(sum, &ndim, &shape));
    EXPECT(ndim == 1 && shape[0] == 4, "shape ndim=%d", ndim);
    OK(pmx_array_dtype(sum, &dtype));
    EXPECT(dtype == PMX_FLOAT32, "dtype %d", dtype);
    OK(pmx_array_device(sum, &device_type, &device_id));
    EXPECT(device_type == PMX_DEVICE_CPU && device_id == 0, "device %d(%d)", device_type, device_id);
    OK(pmx_array_copy_to_cpu(sum, result, sizeof(result)));
    for (i = 0; i < 4; ++i)
      EXPECT(result[i] == a_values[i] + b_values[i], "sum[%d] = %g", i, (double)result[i]);

    /* The same op with attributes: add_scalar(x, scalar=0.5). */
    {
      const char* keys[2] = {"scalar", "reverse"};
      const char* values[2] = {"0.5", "False"};
      PmxOp* add_scalar = NULL;
      OK(pmx_op_find("add_scalar", &add_scalar));
      OK(pmx_op_invoke(add_scalar, 1, &sum, 2, keys, values, PMX_DEVICE_CPU, 0, 0, NULL,
                       &num_outputs, &outputs));
      if (num_outputs == 1) {
        OK(pmx_array_copy_to_cpu(outputs[0], result, sizeof(result)));
        EXPECT(result[3] == 44.5f, "add_scalar gave %g", (double)result[3]);
        OK(pmx_array_free(outputs[0]));
      }
    }
    OK(pmx_array_free(sum));
  }
  OK(pmx_array_free(inputs[0]));
  OK(pmx_array_free(inputs[1]));
  OK(pmx_array_free(NULL));
  OK(pmx_engine_wait_all());
}

static void test_views(void) {
  const float values[6] = {0.f, 1.f, 2.f, 3.f, 4.f, 5.f};
  const int64_t shape23[2] = {2, 3};
  PmxArray* flat = make_vector(values, 6);
  PmxArray* matrix = NULL;
  PmxArray* row = NULL;
  PmxArray* rows = NULL;
  float out[3] = {0};
  int same = -1;

  OK(pmx_array_reshape(flat, shape23, 2, &matrix));
  OK(pmx_array_at(matrix, 1, &row));
  OK(pmx_array_copy_to_cpu(row, out, sizeof(out)));
  EXPECT(out[0] == 3.f && out[2] == 5.f, "row 1 = %g %g %g", (double)out[0], (double)out[1],
         (double)out[2]);
  OK(pmx_array_slice(matrix, 0, 1, &rows));
  OK(pmx_array_same(matrix, rows, &same));
  EXPECT(same == 0, "a slice is not the same array as its parent");
  OK(pmx_array_same(matrix, matrix, &same));
  EXPECT(same == 1, "an array is the same as itself");
  OK(pmx_array_free(rows));
  OK(pmx_array_free(row));
  OK(pmx_array_free(matrix));
  OK(pmx_array_free(flat));
}

static void test_errors(void) {
  PmxOp* op = NULL;
  PmxArray* array = NULL;
  PmxArray* wrong = NULL;
  const int64_t shape[1] = {3};
  float buffer[4];
  int rc;

  rc = pmx_op_find("no_such_operator", &op);
  EXPECT(rc == PMX_ERR_INVALID_ARG, "unknown op gave %d", rc);
  EXPECT(strstr(pmx_last_error(), "no_such_operator") != NULL, "message: %s", pmx_last_error());
  EXPECT(op == NULL, "the output is untouched on failure");

  rc = pmx_array_create(shape, 1, 99, PMX_DEVICE_CPU, 0, &array);
  EXPECT(rc == PMX_ERR_INVALID_ARG && strstr(pmx_last_error(), "99") != NULL,
         "bad dtype gave %d: %s", rc, pmx_last_error());

  rc = pmx_array_create(shape, 1, PMX_FLOAT32, PMX_DEVICE_GPU, 7, &array);
  EXPECT(rc == PMX_ERR_INVALID_ARG && strstr(pmx_last_error(), "gpu(7)") != NULL,
         "missing GPU gave %d: %s", rc, pmx_last_error());

  OK(pmx_array_create(shape, 1, PMX_FLOAT32, PMX_DEVICE_CPU, 0, &array));
  rc = pmx_array_copy_to_cpu(array, buffer, sizeof(buffer)); /* 16 bytes into a 12-byte array */
  EXPECT(rc == PMX_ERR_INVALID_ARG, "size mismatch gave %d: %s", rc, pmx_last_error());

  /* Mixed devices: cpu(0) + cpu(1) names both. */
  OK(pmx_array_create(shape, 1, PMX_FLOAT32, PMX_DEVICE_CPU, 1, &wrong));
  OK(pmx_op_find("add", &op));
  {
    PmxArray* inputs[2];
    PmxArray** outputs = NULL;
    int num_outputs = 0;
    inputs[0] = array;
    inputs[1] = wrong;
    rc = pmx_op_invoke(op, 2, inputs, 0, NULL, NULL, PMX_DEVICE_CPU, 0, 0, NULL, &num_outputs,
                       &outputs);
    EXPECT(rc == PMX_ERR_INVALID_ARG && strstr(pmx_last_error(), "cpu(0)") != NULL &&
               strstr(pmx_last_error(), "cpu(1)") != NULL,
           "mixed devices gave %d: %s", rc, pmx_last_error());
  }
  OK(pmx_array_free(wrong));
  OK(pmx_array_free(array));

  /* A success after failures leaves the API usable. */
  {
    int count = -1;
    OK(pmx_gpu_count(&count));
    EXPECT(count >= 0, "gpu count %d", count);
  }
}

/* Engine callbacks: adds `*(int*)user_data` to a counter; the last one fails. */
static int counter = 0;
static int freed = 0;

static int add_to_counter(void* user_data, int device_type, int device_id, void* stream) {
  (void)device_id;
  (void)stream;
  if (device_type != PMX_DEVICE_CPU) return pmx_error_set(PMX_ERR_INTERNAL, "expected a CPU worker");
  counter += *(const int*)user_data;
  return PMX_OK;
}

static int fail(void* user_data, int device_type, int device_id, void* stream) {
  (void)user_data;
  (void)device_type;
  (void)device_id;
  (void)stream;
  return pmx_error_set(PMX_ERR_INVALID_ARG, "callback failed on purpose");
}

static void count_free(void* user_data) {
  ++freed;
  free(user_data);
}

static void test_engine_push(void) {
  PmxVar* var = NULL;
  int i, rc;
  const char* dump = NULL;

  OK(pmx_var_new(&var));
  for (i = 1; i <= 100; ++i) {
    int* step = (int*)malloc(sizeof(int));
    *step = i;
    /* Each write on `var` runs after the previous one, so the counter is exact. */
    OK(pmx_engine_push(add_to_counter, step, count_free, NULL, 0, &var, 1, PMX_DEVICE_CPU, 0,
                       "add_to_counter"));
  }
  OK(pmx_var_wait(var));
  EXPECT(counter == 5050, "counter = %d", counter);
  EXPECT(freed == 100, "user data freed %d times", freed);

  OK(pmx_engine_push(fail, NULL, NULL, NULL, 0, &var, 1, PMX_DEVICE_CPU, 0, NULL));
  rc = pmx_var_wait(var);
  EXPECT(rc != PMX_OK && strstr(pmx_last_error(), "callback failed on purpose") != NULL,
         "failing callback: %d %s", rc, pmx_last_error());
  /* Raised once: the next wait succeeds. */
  OK(pmx_var_wait(var));
  OK(pmx_engine_dump(&dump));
  EXPECT(dump != NULL, "dump text");

  /* A failed push still frees the user data exactly once. */
  {
    int* step = (int*)malloc(sizeof(int));
    rc = pmx_engine_push(add_to_counter, step, count_free, NULL, 0, &var, 1, 42, 0, NULL);
    EXPECT(rc == PMX_ERR_INVALID_ARG && freed == 101, "bad device gave %d, freed %d", rc, freed);
  }
  OK(pmx_var_free(var));
  OK(pmx_var_free(NULL));
  OK(pmx_engine_wait_all());
}

/* The profiler from C: callbacks pushed while it runs are in its aggregate statistics and its
 * trace, under their names; those pushed after it stopped are not. */
static void test_profiler(void) {
  PmxVar* var = NULL;
  const char* json = NULL;
  int i;
  OK(pmx_profiler_clear());
  OK(pmx_var_new(&var));
  OK(pmx_profiler_set_running(1));
  for (i = 0; i < 3; ++i) {
    int* step = (int*)malloc(sizeof(int));
    *step = 1;
    OK(pmx_engine_push(add_to_counter, step, count_free, NULL, 0, &var, 1, PMX_DEVICE_CPU, 0,
                       "profiled_from_c"));
  }
  OK(pmx_var_wait(var));
  OK(pmx_profiler_set_running(0));
  {
    int* step = (int*)malloc(sizeof(int));
    *step = 1;
    OK(pmx_engine_push(add_to_counter, step, count_free, NULL, 0, &var, 1, PMX_DEVICE_CPU, 0,
                       "not_profiled"));
  }
  OK(pmx_var_wait(var));
  OK(pmx_profiler_aggregate_json(0, &json));
  EXPECT(json != NULL && strstr(json, "\"name\": \"profiled_from_c\", \"count\": 3") != NULL,
         "aggregate: %s", json ? json : "(null)");
  EXPECT(json != NULL && strstr(json, "not_profiled") == NULL, "aggregate: %s",
         json ? json : "(null)");
  OK(pmx_profiler_trace_json(&json));
  EXPECT(json != NULL && strstr(json, "\"traceEvents\"") != NULL &&
             strstr(json, "profiled_from_c") != NULL,
         "trace: %s", json ? json : "(null)");
  OK(pmx_profiler_clear());
  OK(pmx_var_free(var));
  OK(pmx_engine_wait_all());
}

/* The deterministic mode: off unless PYMX_ENFORCE_DETERMINISM=1 started it (ctest does not set
 * it), switched with the previous state returned, and anything but 0 or 1 refused. */
static void test_deterministic_mode(void) {
  int start = -1, previous = -1, on = -1, rc;
  OK(pmx_deterministic_get(&start));
  EXPECT(start == 0 || start == 1, "start %d", start);
  OK(pmx_deterministic_set(1, &previous));
  EXPECT(previous == start, "previous %d, start %d", previous, start);
  OK(pmx_deterministic_get(&on));
  EXPECT(on == 1, "on %d after setting 1", on);
  OK(pmx_deterministic_set(0, NULL));
  OK(pmx_deterministic_get(&on));
  EXPECT(on == 0, "on %d after setting 0", on);
  rc = pmx_deterministic_set(2, NULL);
  EXPECT(rc == PMX_ERR_INVALID_ARG && strstr(pmx_last_error(), "on=2 is not 0 or 1") != NULL,
         "setting 2 gave %d: %s", rc, pmx_last_error());
  rc = pmx_deterministic_get(NULL);
  EXPECT(rc == PMX_ERR_INVALID_ARG, "a NULL output gave %d", rc);
  OK(pmx_deterministic_set(start, NULL));
}

int main(void) {
  test_version();
  test_round_trip_add();
  test_views();
  test_errors();
  test_engine_push();
  test_profiler();
  test_deterministic_mode();
  if (failures == 0) printf("test_c_api: all passed\n");
  return failures == 0 ? 0 : 1;
}
