/*
 * nccl-net-bench-ncclib.c - `-p nccl-ib[:PATH]`: NCCL's own IB transport as a
 * plugin, for side-by-side comparisons.
 *
 * NCCL does not export its IB transport: the table is the local symbol
 * `ncclNetIb` of libnccl.so.2. We dlopen the library (RTLD_LOCAL), find the
 * symbol's offset in the file's .symtab (absent when the library is
 * stripped) and add the load base the dynamic linker chose (link_map
 * l_addr). The table has the layout of NCCL's internal ncclNet_t: v11 in
 * 2.28 and 2.29, v12 from 2.30 (nccl-net-api.md). NCCL's IB transport
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
#include <sys/mman.h>
#include <sys/stat.h>
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

/* st_value of a defined symbol `name` in the ELF64 image; 0 not found, -1 no .symtab. */
static int nb_elf_symtab_find(const unsigned char *img, size_t len, const char *name,
			      uint64_t *value, const char **why)
{
	const Elf64_Ehdr *eh = (const Elf64_Ehdr *)img;
	const Elf64_Shdr *sh;
	int i, have_symtab = 0;

	if (len < sizeof(*eh) || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 ||
	    eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    eh->e_shoff == 0 || eh->e_shoff > len ||
	    (size_t)eh->e_shnum * sizeof(Elf64_Shdr) > len - eh->e_shoff) {
		*why = "not a 64-bit ELF file with section headers";
		return -1;
	}
	sh = (const Elf64_Shdr *)(img + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *st = &sh[i], *str;
		size_t n, k;

		if (st->sh_type != SHT_SYMTAB || st->sh_link >= eh->e_shnum)
			continue;
		str = &sh[st->sh_link];
		if (st->sh_offset > len || st->sh_size > len - st->sh_offset ||
		    str->sh_offset > len || str->sh_size > len - str->sh_offset) {
			*why = "its .symtab lies outside the file";
			return -1;
		}
		have_symtab = 1;
		n = st->sh_size / sizeof(Elf64_Sym);
		for (k = 0; k < n; k++) {
			const Elf64_Sym *s = (const Elf64_Sym *)(img + st->sh_offset) + k;

			if (s->st_name >= str->sh_size || s->st_shndx == SHN_UNDEF)
				continue;
			if (strncmp((const char *)img + str->sh_offset + s->st_name, name,
				    str->sh_size - s->st_name) == 0) {
				*value = s->st_value;
				return 1;
			}
		}
	}
	*why = have_symtab ? "has no symbol " NB_NCCL_SYM " (not an NCCL with an IB transport?)"
			   : "is stripped (no .symtab), so its internal " NB_NCCL_SYM
			     " table cannot be found";
	return have_symtab ? 0 : -1;
}

static int nb_nccl_offset(const char *path, uint64_t *off)
{
	const char *why = NULL;
	struct stat sb;
	void *img;
	int fd, rc;

	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		nb_err("-p nccl-ib: cannot open %s: %s (set the path with -p nccl-ib:PATH or "
		       "NCCL_NET_BENCH_NCCL_LIB)", path, strerror(errno));
		return -1;
	}
	if (fstat(fd, &sb) != 0 || sb.st_size <= 0) {
		nb_err("-p nccl-ib: cannot read %s", path);
		close(fd);
		return -1;
	}
	img = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (img == MAP_FAILED) {
		nb_err("-p nccl-ib: cannot map %s: %s", path, strerror(errno));
		return -1;
	}
	rc = nb_elf_symtab_find(img, (size_t)sb.st_size, NB_NCCL_SYM, off, &why);
	munmap(img, (size_t)sb.st_size);
	if (rc != 1) {
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
	uint64_t off;

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
