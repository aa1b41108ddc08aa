/*
 * fuzz_common.h - shared by the libFuzzer targets of the network decoders
 * (src/wire.c). Each target feeds arbitrary bytes to one decoder and, when
 * the decoder accepts them, checks the contract in wire.h: the host struct is
 * in range, and re-encoding it gives back exactly the bytes that were
 * accepted (the wire format is canonical: reserved bytes must be zero), so
 * nothing the decoder accepts is misread.
 */
#ifndef NV_FUZZ_COMMON_H
#define NV_FUZZ_COMMON_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define FUZZ_ASSERT(c) \
	do { \
		if (!(c)) { \
			fprintf(stderr, "fuzz contract violated: %s (%s:%d)\n", #c, __FILE__, \
				__LINE__); \
			abort(); \
		} \
	} while (0)

/* The reason text must be a terminated, non-empty line. */
static inline void fuzz_check_why(const char *why, size_t len)
{
	FUZZ_ASSERT(memchr(why, '\0', len) != NULL);
	FUZZ_ASSERT(why[0] != '\0');
	FUZZ_ASSERT(strchr(why, '\n') == NULL);
}

#endif
