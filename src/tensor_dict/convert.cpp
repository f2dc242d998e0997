// (in progress)
#include "detail/walk.h"
