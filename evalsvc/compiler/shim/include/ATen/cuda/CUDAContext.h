#pragma once
#include "evalsvc_torch_shim.h"  // evalsvc fast path: see that header
