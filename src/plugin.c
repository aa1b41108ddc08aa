/* placeholder: replaced by the vtable implementation */
#include "config.h"
