/*
 * nccl-net-bench-ncclib.c - `-p nccl-ib[:PATH]`: NCCL's own IB transport as a
 * plugin, for side-by-side comparisons.
 *
 * NCCL does not export its IB transport: the table is the local symbol
 * `ncclNetIb` of libnccl.so.2. We dlopen the library (RTLD_LOCAL), find the
 * symbol's offset in the file's .symtab (absent when the library is
 * stripped) and add the load base the dynamic linker chose (link_map
 * l_addr). The table has the layout of NCCL's internal ncclNet_t: v11 in
 * 2.28 and 2.29, v12 from 2.30 (docs/net-api.md). NCCL's IB transport
 * initialises without a GPU; only host-memory transfers are used here.
 */
#include "config.h"

#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/nccl-net-bench.h"

#define NB_NCCL_SYM "ncclNetIb"

static const char *const nb_nccl_default[] = {
	"/usr/local/cuda/lib64/libnccl.so.2",
	"/usr/local/cuda/lib/libnccl.so.2",
};

/* The default library: NCCL_NET_BENCH_NCCL_LIB, else the CUDA toolkit's. */
const char *nb_nccl_lib_default(void)
{
	const char *env = getenv("NCCL_NET_BENCH_NCCL_LIB");
	size_t i;

	if (env && *env)
		return env;
	for (i = 0; i < sizeof(nb_nccl_default) / sizeof(nb_nccl_default[0]); i++)
		if (access(nb_nccl_default[i], R_OK) == 0)
			return nb_nccl_default[i];
	return nb_nccl_default[0];
}

/* len bytes at off of fd into a new buffer (NULL on a short read). */
static void *nb_pread_all(int fd, uint64_t off, uint64_t len)
{
	char *buf = len < (1ull << 31) ? malloc(len ? len : 1) : NULL;
	uint64_t got = 0;

	while (buf && got < len) {
		ssize_t n = pread(fd, buf + got, len - got, (off_t)(off + got));

		if (n <= 0) {
			free(buf);
			return NULL;
		}
		got += (uint64_t)n;
	}
	return buf;
}

/* st_value of the defined symbol `name` in one SHT_SYMTAB section; 1 found, 0 not, -1 error. */
static int nb_symtab_scan(int fd, const Elf64_Shdr *st, const Elf64_Shdr *str, const char *name,
			  uint64_t *value)
{
	Elf64_Sym *syms = nb_pread_all(fd, st->sh_offset, st->sh_size);
	char *names = nb_pread_all(fd, str->sh_offset, str->sh_size);
	size_t n = st->sh_size / sizeof(Elf64_Sym), k;
	int rc = syms && names ? 0 : -1;

	for (k = 0; rc == 0 && k < n; k++) {
		if (syms[k].st_name >= str->sh_size || syms[k].st_shndx == SHN_UNDEF)
			continue;
		if (strncmp(names + syms[k].st_name, name, str->sh_size - syms[k].st_name) == 0) {
			*value = syms[k].st_value;
			rc = 1;
		}
	}
	free(syms);
	free(names);
	return rc;
}

/*
 * st_value of `name` from the file's .symtab: 1 found, else 0 with *why.
 * Read with pread, not mmap: a mapping of the file that goes away again
 * makes valgrind drop the library's symbols (scripts/cpu-cost.sh needs them).
 */
static int nb_elf_symtab_find(int fd, const char *name, uint64_t *value, const char **why)
{
	Elf64_Ehdr eh;
	Elf64_Shdr *sh = NULL;
	int i, rc = 0, have_symtab = 0;

	if (pread(fd, &eh, sizeof(eh), 0) != (ssize_t)sizeof(eh) ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shoff == 0 ||
	    !(sh = nb_pread_all(fd, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof(Elf64_Shdr)))) {
		*why = "is not a 64-bit ELF file with section headers";
		return 0;
	}
	for (i = 0; i < eh.e_shnum && rc == 0; i++) {
		if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh.e_shnum)
			continue;
		have_symtab = 1;
		rc = nb_symtab_scan(fd, &sh[i], &sh[sh[i].sh_link], name, value);
	}
	free(sh);
	if (rc < 0)
		*why = "has a .symtab that cannot be read";
	else if (rc == 0)
		*why = have_symtab ? "has no symbol " NB_NCCL_SYM " (not an NCCL with an IB transport?)"
				   : "is stripped (no .symtab), so its internal " NB_NCCL_SYM
				     " table cannot be found";
	return rc == 1;
}

static int nb_nccl_offset(const char *path, uint64_t *off)
{
	const char *why = NULL;
	int fd, found;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		nb_err("-p nccl-ib: cannot open %s: %s (set the path with -p nccl-ib:PATH or "
		       "NCCL_NET_BENCH_NCCL_LIB)", path, strerror(errno));
		return -1;
	}
	found = nb_elf_symtab_find(fd, NB_NCCL_SYM, off, &why);
	close(fd);
	if (!found) {
		nb_err("-p nccl-ib: %s %s", path, why);
		return -1;
	}
	return 0;
}

/* Internal ncclNet_t version of this NCCL (ncclGetVersion: major*10000+minor*100+patch). */
static int nb_nccl_table_version(void *lib, const char *path)
{
	int (*get_version)(int *) = (int (*)(int *))dlsym(lib, "ncclGetVersion");
	int v = 0;

	if (!get_version || get_version(&v) != 0) {
		nb_err("-p nccl-ib: %s has no ncclGetVersion", path);
		return -1;
	}
	if (v >= 23000)
		return 12;
	if (v >= 22800)
		return 11;
	nb_err("-p nccl-ib: %s is NCCL %d.%d.%d; only 2.28 and later are supported", path,
	       v / 10000, v / 100 % 100, v % 100);
	return -1;
}

int nb_net_load_nccl_ib(struct nb_net *net, const char *path)
{
	struct link_map *lm = NULL;
	uint64_t off = 0;

	memset(net, 0, sizeof(*net));
	if (!path || !*path)
		path = nb_nccl_lib_default();
	if (nb_nccl_offset(path, &off) != 0)
		return -1;
	net->lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!net->lib) {
		nb_err("-p nccl-ib: cannot load %s: %s", path, dlerror());
		return -1;
	}
	if (dlinfo(net->lib, RTLD_DI_LINKMAP, &lm) != 0 || !lm) {
		nb_err("-p nccl-ib: no load address for %s: %s", path, dlerror());
		return -1;
	}
	net->version = nb_nccl_table_version(net->lib, path);
	if (net->version < 0)
		return -1;
	snprintf(net->path, sizeof(net->path), "%s", path);
	net->table = (const void *)(lm->l_addr + off);
	net->name = *(const char *const *)net->table;
	if (!net->name || strcmp(net->name, "IB") != 0) {
		nb_err("-p nccl-ib: %s's " NB_NCCL_SYM " is not named \"IB\" (\"%s\")", path,
		       net->name ? net->name : "(null)");
		return -1;
	}
	return 0;
}
