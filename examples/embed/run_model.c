/* run_model.c - load a compiled model with the tfm runtime's C API and run
 * one entry point on zero-filled inputs.
 *
 *   run_model_c MODEL.so [ENTRY]        (ENTRY defaults to "infer")
 */
#include <tfm/runtime.h>

#include <stdio.h>
#include <stdlib.h>

static int fail(tfm_status_t status) {
  fprintf(stderr, "error: %s\n", tfm_status_message(status));
  tfm_status_free(status);
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL.so [ENTRY]\n", argv[0]);
    return 2;
  }
  const char *entry = argc > 2 ? argv[2] : "infer";
  tfm_context_t *ctx = NULL;
  tfm_module_t *module = NULL;
  tfm_session_t *session = NULL;
  tfm_status_t s;
  int rc = 1;
  if ((s = tfm_context_create(NULL, &ctx)))
    return fail(s);
  if ((s = tfm_module_load(ctx, argv[1], &module))) {
    rc = fail(s);
    goto done;
  }
  if ((s = tfm_session_create(module, NULL, &session))) {
    rc = fail(s);
    goto done;
  }
  /* One zero-filled tensor per input, shaped as the model declares. */
  tfm_tensor_t *inputs[16] = {0}, *outputs[16] = {0};
  size_t num_inputs = 0, num_outputs = 0;
  tfm_tensor_desc_t d;
  while (num_inputs < 16 &&
         !(s = tfm_module_entry_io(module, entry, 0, num_inputs, &d))) {
    if ((s = tfm_tensor_create(d.dtype, d.dims, d.rank,
                               &inputs[num_inputs]))) {
      rc = fail(s);
      goto done;
    }
    ++num_inputs;
  }
  tfm_status_free(s);
  while (num_outputs < 16 &&
         !(s = tfm_module_entry_io(module, entry, 1, num_outputs, &d)))
    ++num_outputs;
  tfm_status_free(s);
  if ((s = tfm_session_run(session, entry, inputs, num_inputs, outputs,
                           num_outputs))) {
    rc = fail(s);
    goto done;
  }
  for (size_t i = 0; i < num_outputs; ++i) {
    tfm_module_entry_io(module, entry, 1, i, &d);
    printf("%s:", d.name);
    if (tfm_tensor_dtype(outputs[i]) == TFM_DTYPE_F32) {
      const float *v = (const float *)tfm_tensor_data(outputs[i]);
      size_t n = tfm_tensor_byte_size(outputs[i]) / sizeof(float);
      for (size_t j = 0; j < n && j < 8; ++j)
        printf(" %g", v[j]);
    }
    printf("\n");
    tfm_tensor_release(outputs[i]);
  }
  rc = 0;
done:
  for (size_t i = 0; i < 16; ++i)
    tfm_tensor_release(inputs[i]);
  tfm_session_release(session);
  tfm_module_release(module);
  tfm_context_release(ctx);
  return rc;
}
