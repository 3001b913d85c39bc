/*
 * file.c — read-only memory maps of whole files.
 */
#include <errno.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/base.h"

kvik_status file_map(struct mapped_file *mf, const char *path, struct kvik_err *err) {
    mf->data = NULL;
    mf->size = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return err_set(err, KVIK_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat st;
    if (fstat(fd, &st) != 0) {
        int e = errno;
        close(fd);
        return err_set(err, KVIK_ERR_IO, "%s: %s", path, strerror(e));
    }
    if (!S_ISREG(st.st_mode)) {
        close(fd);
        return err_set(err, KVIK_ERR_IO, "%s: not a regular file", path);
    }
    if (st.st_size == 0) {
        close(fd);
        return KVIK_OK;
    }
    void *p = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    int e = errno;
    close(fd);
    if (p == MAP_FAILED) return err_set(err, KVIK_ERR_IO, "%s: mmap: %s", path, strerror(e));
    mf->data = p;
    mf->size = (size_t)st.st_size;
    return KVIK_OK;
}

void file_unmap(struct mapped_file *mf) {
    if (mf->data) munmap((void *)mf->data, mf->size);
    mf->data = NULL;
    mf->size = 0;
}
