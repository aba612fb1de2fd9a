/* SHA-256 against the FIPS 180-2 examples ("abc", the two-block message, a million 'a')
 * and the empty string, and against coreutils' sha256sum on fresh random inputs of every
 * length around the padding boundaries (55, 56, 63, 64 bytes). */
#include <unistd.h>
#include "check.h"
#include "../workloads/sha256.h"

static void known(void) {
    char h[65];
    sha256_hex("", 0, h);
    CHECK(!strcmp(h, "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"), "empty: %s", h);
    sha256_hex("abc", 3, h);
    CHECK(!strcmp(h, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "abc: %s", h);
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq";
    sha256_hex(two, strlen(two), h);
    CHECK(!strcmp(h, "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1"), "two blocks: %s", h);
    char *a = malloc(1000000);
    memset(a, 'a', 1000000);
    sha256_hex(a, 1000000, h);
    CHECK(!strcmp(h, "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0"), "million a: %s", h);
    free(a);
}

static void against_sha256sum(void) {
    if (system("command -v sha256sum >/dev/null 2>&1")) { printf("SKIP: no sha256sum\n"); return; }
    char path[] = "/tmp/kvb_sha_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) { CHECK(0, "mkstemp"); return; }
    close(fd);
    int lens[] = {1, 55, 56, 57, 63, 64, 65, 119, 120, 128, test_int(129, 5000)};
    for (size_t t = 0; t < sizeof lens / sizeof lens[0]; t++) {
        unsigned char buf[5000];
        for (int i = 0; i < lens[t]; i++) buf[i] = (unsigned char)test_int(0, 255);
        FILE *f = fopen(path, "wb");
        fwrite(buf, 1, (size_t)lens[t], f);
        fclose(f);
        char cmd[256], want[80] = "", got[65];
        snprintf(cmd, sizeof cmd, "sha256sum %s", path);
        FILE *p = popen(cmd, "r");
        if (!p || !fgets(want, sizeof want, p)) { CHECK(0, "sha256sum failed"); if (p) pclose(p); continue; }
        pclose(p);
        want[64] = 0;
        sha256_hex(buf, (size_t)lens[t], got);
        CHECK(!strcmp(got, want), "%d random bytes: %s, sha256sum %s", lens[t], got, want);
    }
    remove(path);
}

int main(void) {
    test_seed();
    known();
    against_sha256sum();
    return check_done("test_sha256");
}
