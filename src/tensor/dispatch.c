/* dispatch.c — placeholder. */
#include "tensor/tensor.h"

const char *kvik_cpu_isa(void) { return "scalar"; }
