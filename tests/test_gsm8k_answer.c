/* The GSM8K answer parser reads a number written without its leading zero: "-.5" is -0.5
 * (it read 5 before), ".75" is 0.75. Fixed cases, then seeded random outputs whose last
 * number is written in one of the forms GSM8K solutions use (sign, thousands commas,
 * decimals with or without the zero, a sentence's final '.'), each read back as that value. */
#include "check.h"
#include "../workloads/metrics.h"

static const char *const WORDS[] = {"so", "she", "has", "left", "apples", "in", "total", "the", "answer", "is",
                                    "=", "+", "each", "costs", "$"};

/* The number v_int + frac/100 written in a random form; *value gets what it means. */
static void write_number(uint64_t r, char *buf, size_t cap, double *value) {
    int neg = r & 1, commas = (r >> 1) & 1, kind = (int)((r >> 2) % 3);
    long whole = (long)((r >> 8) % 3000000);
    int frac = (int)((r >> 40) % 99) + 1;
    char w[32];
    if (commas && whole >= 1000) {
        if (whole >= 1000000) snprintf(w, sizeof w, "%ld,%03ld,%03ld", whole / 1000000, whole / 1000 % 1000, whole % 1000);
        else snprintf(w, sizeof w, "%ld,%03ld", whole / 1000, whole % 1000);
    } else {
        snprintf(w, sizeof w, "%ld", whole);
    }
    if (kind == 0) {                      /* whole number */
        snprintf(buf, cap, "%s%s", neg ? "-" : "", w);
        *value = (double)whole;
    } else if (kind == 1) {               /* with decimals */
        snprintf(buf, cap, "%s%s.%02d", neg ? "-" : "", w, frac);
        *value = (double)whole + frac / 100.0;
    } else {                              /* no leading zero: ".5", "-.25" */
        snprintf(buf, cap, "%s.%02d", neg ? "-" : "", frac);
        *value = frac / 100.0;
    }
    if (neg) *value = -*value;
}

int main(void) {
    char out[64];
    CHECK(metric_gsm8k_extract("The answer is -.5", out, sizeof out) && !strcmp(out, "-.5"), "'-.5' read as '%s'", out);
    CHECK(metric_gsm8k_match("The answer is -.5.", "-0.5") && !metric_gsm8k_match("The answer is -.5", "5"), "-.5 == -0.5");
    CHECK(metric_gsm8k_match("It costs .75 dollars", "0.75"), ".75 == 0.75");
    CHECK(metric_gsm8k_extract("3.5 then 2", out, sizeof out) && !strcmp(out, "2"), "last number '%s'", out);
    CHECK(metric_gsm8k_extract("so 4.25", out, sizeof out) && !strcmp(out, "4.25"), "decimals '%s'", out);
    CHECK(metric_gsm8k_extract("He left. 5 remain", out, sizeof out) && !strcmp(out, "5"), "a sentence's '.' is not a point: '%s'", out);
    CHECK(metric_gsm8k_extract("total is 1,234.", out, sizeof out) && !strcmp(out, "1234"), "trailing '.': '%s'", out);

    uint64_t seed = test_seed();
    for (int t = 0; t < 2000; t++) {
        char text[512] = "", num[48];
        size_t n = 0;
        int words = (int)(test_next() % 12);
        for (int i = 0; i < words; i++) {             /* text, some numbers, then the answer */
            uint64_t r = test_next();
            double ignored;
            if (r % 4 == 0) write_number(test_next(), num, sizeof num, &ignored);
            n += (size_t)snprintf(text + n, sizeof text - n, "%s ", r % 4 ? WORDS[r % 15] : num);
        }
        double want;
        write_number(test_next(), num, sizeof num, &want);
        snprintf(text + n, sizeof text - n, "%s%s", num, test_next() & 1 ? "." : "");
        CHECK(metric_gsm8k_extract(text, out, sizeof out) && fabs(strtod(out, NULL) - want) < 1e-9,
              "seed %llu: '%s' read as '%s', want %g", (unsigned long long)seed, text, out, want);
    }
    return check_done("test_gsm8k_answer");
}
