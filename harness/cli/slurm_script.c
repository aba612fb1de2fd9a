/* kvbench slurm-script: writes a bash script that runs one `kvbench run` command on a SLURM
 * cluster as an array of N shards (kvbench run --shard K/N, each into its own results
 * file: SQLite files must not have writers on several machines) followed by a merge job
 * that waits for all of them (--dependency=afterok). `bash FILE` submits both; `sbatch
 * FILE` submits the array alone. The tasks are requeueable: a preempted or requeued shard
 * starts again on its own file and skips what it committed. */
#include "commands.h"
#include "../identity/plugin.h"
#include "../../kernels/host.h"

#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static void usage(FILE *f) {
    fprintf(f,
            "usage: kvbench slurm-script --shards N [options] -- KVBENCH run ARGS...\n"
            "\n"
            "Writes a bash script for SLURM that runs `KVBENCH run ARGS...` in N shards, one array\n"
            "task each (--shard $SLURM_ARRAY_TASK_ID/N), every shard into its own results file\n"
            "beside --db (DB.shard-K-of-N.db, log DB.shard-K-of-N.log), then merges them into the\n"
            "--db file with a job that waits for the whole array (afterok).\n"
            "\n"
            "  bash FILE                    submits the array and the merge job\n"
            "  sbatch FILE                  submits the array only\n"
            "  sbatch --array=2,5 FILE      runs shards 2 and 5 again (they resume their files)\n"
            "\n"
            "  --shards N         number of shards, 1..10000 (required)\n"
            "  --out FILE         write the script to FILE, executable (default: standard output)\n"
            "  --chdir DIR        directory the jobs run in; relative paths in the command are\n"
            "                     relative to it (default: the current directory)\n"
            "  --partition P      #SBATCH --partition\n"
            "  --account A        #SBATCH --account\n"
            "  --time T           #SBATCH --time per shard (e.g. 4:00:00)\n"
            "  --cpus N           #SBATCH --cpus-per-task; the run gets --threads N unless it has one\n"
            "  --mem M            #SBATCH --mem (e.g. 16G)\n"
            "  --max-running K    at most K shards at once (--array=0-(N-1)%%K)\n"
            "  --sbatch OPTION    any other #SBATCH line, e.g. --sbatch=--qos=low (repeatable)\n"
            "  --help             this text\n"
            "\n"
            "With --backend cuda in the command each shard asks for one GPU (--gres=gpu:1).\n"
            "Shards split the cases by estimated cost (kvbench run --help: --shard).\n");
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    kb_vcomplain("slurm-script", fmt, ap);
    va_end(ap);
    return code;
}

static int has_ctl(const char *s) {
    for (; *s; s++)
        if ((unsigned char)*s < 0x20 || *s == 0x7f) return 1;
    return 0;
}

/* s quoted for bash as printf %q would, so that it reads back byte for byte and stays on
 * its line (a comment line too: a newline there would start a command): '...' with '\''
 * for a quote, or $'...' with escapes when s holds a control character. */
static void shq(FILE *f, const char *s) {
    if (!has_ctl(s)) {
        fputc('\'', f);
        for (; *s; s++)
            if (*s == '\'') fputs("'\\''", f);
            else fputc(*s, f);
        fputc('\'', f);
        return;
    }
    fputs("$'", f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '\'' || *p == '\\') fprintf(f, "\\%c", *p);
        else if (*p == '\n') fputs("\\n", f);
        else if (*p == '\t') fputs("\\t", f);
        else if (*p < 0x20 || *p == 0x7f) fprintf(f, "\\x%02x", *p);
        else fputc(*p, f);
    }
    fputc('\'', f);
}

/* s for an error message, which must stay one line: control characters as \n or \xHH
 * (one of two static buffers, so that a message can show two values). */
static const char *shown(const char *s) {
    static char buf[2][512];
    static int which;
    char *b = buf[which ^= 1];
    size_t n = 0;
    for (; *s && n + 8 < sizeof buf[0]; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '\n') n += (size_t)snprintf(b + n, 8, "\\n");
        else if (c < 0x20 || c == 0x7f) n += (size_t)snprintf(b + n, 8, "\\x%02x", c);
        else b[n++] = (char)c;
    }
    if (*s) memcpy(b + n, "...", 4);
    else b[n] = 0;
    return b;
}

/* Paths that go on #SBATCH lines and into job names. */
static int path_ok(const char *s) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr("._-+/@:,=", *s)))
            return 0;
    return 1;
}

/* What SLURM accepts for each value (sbatch(1)); anything else is refused before a line is
 * written, as a value goes both on an #SBATCH line and onto the merge job's sbatch command. */
static int name_chars(const char *s, const char *extra) {
    if (!*s) return 0;
    for (; *s; s++)
        if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || strchr(extra, *s)))
            return 0;
    return 1;
}
static int digits(const char **p) {
    const char *s = *p;
    while (**p >= '0' && **p <= '9') (*p)++;
    return *p > s;
}
/* minutes, minutes:seconds, hours:minutes:seconds, days-hours, days-hours:minutes,
 * days-hours:minutes:seconds, or UNLIMITED / INFINITE */
static int time_ok(const char *s) {
    if (!strcmp(s, "UNLIMITED") || !strcmp(s, "INFINITE")) return 1;
    if (!digits(&s)) return 0;
    int days = *s == '-', colons = 0;
    if (days && (s++, !digits(&s))) return 0;
    while (*s == ':' && colons < 2) {
        s++;
        if (!digits(&s)) return 0;
        colons++;
    }
    return !*s;
}
/* a size in megabytes, or with a K, M, G or T suffix */
static int mem_ok(const char *s) {
    if (!digits(&s)) return 0;
    if (*s && strchr("KMGTkmgt", *s)) s++;
    return !*s;
}
/* --name or --name=value for an #SBATCH line: a lower-case option name, and a value of
 * letters, digits and _ . , : = + / @ % * & | [ ] - (node lists, constraints, gres) */
static int sbatch_opt_ok(const char *s) {
    if (strncmp(s, "--", 2)) return 0;
    const char *p = s + 2;
    for (; *p && *p != '='; p++)
        if (!((*p >= 'a' && *p <= 'z') || (*p >= '0' && *p <= '9') || *p == '-')) return 0;
    if (p == s + 2) return 0;
    if (*p == '=') return name_chars(p + 1, "_.,:=+/@%*&|[]-");
    return 1;
}

static int parse_count(const char *flag, const char *s, int lo, int hi, int *out) {
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) return fail(2, "%s '%s': expected an integer in %d..%d", flag, shown(s), lo, hi);
    *out = (int)v;
    return 0;
}

int cmd_slurm_script(int argc, char **argv) {
    int shards = 0, cpus = 0, max_running = 0, sep = -1;
    const char *out = NULL, *chdir_to = NULL, *partition = NULL, *account = NULL, *time_lim = NULL, *mem = NULL;
    const char *extra[32];
    int n_extra = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--")) {
            sep = i;
            break;
        }
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        }
        char flag[32];
        const char *val, *eq = strchr(a, '=');
        size_t len = eq ? (size_t)(eq - a) : strlen(a);
        if (strncmp(a, "--", 2) || len >= sizeof flag)
            return fail(2, "unexpected argument '%s' (the command goes after --; see kvbench slurm-script --help)", shown(a));
        memcpy(flag, a, len);
        flag[len] = 0;
        if (eq) val = eq + 1;
        else if (i + 1 < argc) val = argv[++i];
        else return fail(2, "%s needs a value", shown(flag));
        int e = 0;
        if (!strcmp(flag, "--shards")) e = parse_count(flag, val, 1, 10000, &shards);
        else if (!strcmp(flag, "--cpus")) e = parse_count(flag, val, 1, 4096, &cpus);
        else if (!strcmp(flag, "--max-running")) e = parse_count(flag, val, 1, 10000, &max_running);
        else if (!strcmp(flag, "--out")) out = val;
        else if (!strcmp(flag, "--chdir")) chdir_to = val;
        else if (!strcmp(flag, "--partition")) partition = val;
        else if (!strcmp(flag, "--account")) account = val;
        else if (!strcmp(flag, "--time")) time_lim = val;
        else if (!strcmp(flag, "--mem")) mem = val;
        else if (!strcmp(flag, "--sbatch")) {
            if (n_extra == 32) return fail(2, "--sbatch: more than 32 options");
            if (!sbatch_opt_ok(val))
                return fail(2, "--sbatch '%s': expected one sbatch option like --qos=low (a value of letters, digits "
                               "and _.,:=+/@%%*&|[]-)", shown(val));
            extra[n_extra++] = val;
        } else return fail(2, "unknown option '%s' (see kvbench slurm-script --help)", shown(flag));
        if (e) return e;
    }
    const char *vals[] = {partition, account, time_lim, mem};
    const char *names[] = {"--partition", "--account", "--time", "--mem"};
    if (partition && !name_chars(partition, "_.-,"))
        return fail(2, "--partition '%s': not a SLURM partition name (letters, digits, _ . - and commas between names)",
                    shown(partition));
    if (account && !name_chars(account, "_.-"))
        return fail(2, "--account '%s': not a SLURM account name (letters, digits, _ . -)", shown(account));
    if (time_lim && !time_ok(time_lim))
        return fail(2, "--time '%s': expected a SLURM time limit: minutes, [days-]hours:minutes:seconds, or UNLIMITED",
                    shown(time_lim));
    if (mem && !mem_ok(mem)) return fail(2, "--mem '%s': expected a size such as 16G (megabytes, or K, M, G, T)", shown(mem));
    if (!shards) return fail(2, "--shards N is required");
    if (sep < 0 || sep + 2 >= argc || strcmp(argv[sep + 2], "run"))
        return fail(2, "expected the command after --: KVBENCH run ARGS... (e.g. -- ./kvbench run --workload niah --db results/niah.db)");
    char **cmd = argv + sep + 1;
    int n_cmd = argc - sep - 1;

    /* the run's --db (becomes the merged file), --backend, --threads; no --shard of its own */
    const char *db = NULL;
    int db_at = -1, cuda = 0, has_threads = 0;
    for (int i = 2; i < n_cmd; i++) {
        const char *a = cmd[i];
        if (!strcmp(a, "--shard") || !strncmp(a, "--shard=", 8))
            return fail(2, "the command has --shard: the script gives every array task its own");
        if (!strcmp(a, "--threads") || !strncmp(a, "--threads=", 10)) has_threads = 1;
        if (!strcmp(a, "--db") && i + 1 < n_cmd) db = cmd[i + 1], db_at = i;
        else if (!strncmp(a, "--db=", 5)) db = a + 5, db_at = i;
        if ((!strcmp(a, "--backend") && i + 1 < n_cmd && !strcmp(cmd[i + 1], "cuda")) || !strcmp(a, "--backend=cuda"))
            cuda = 1;
    }
    if (!db || !*db) return fail(2, "the command needs --db FILE (the merged results file)");
    char base[PATH_MAX];
    size_t bl = strlen(db);
    if (bl >= sizeof base) return fail(2, "--db '%s': path too long", shown(db));
    memcpy(base, db, bl + 1);
    if (bl > 3 && !strcmp(base + bl - 3, ".db")) base[bl - 3] = 0;
    const char *slash = strrchr(base, '/');
    const char *stem = slash ? slash + 1 : base;
    char cwd[PATH_MAX];
    if (!chdir_to) {
        if (!getcwd(cwd, sizeof cwd)) return fail(1, "cannot read the current directory: %s", strerror(errno));
        chdir_to = cwd;
    }
    /* the merge job's command goes through sh (sbatch --wrap), which has no $'...' */
    if (has_ctl(cmd[0])) return fail(2, "the command's program path contains a control character");
    if (!path_ok(base)) return fail(2, "--db '%s': the results file's path must use only letters, digits and ._-+/@:,=", shown(db));
    if (!path_ok(chdir_to))
        return fail(2, "--chdir '%s': the directory must use only letters, digits and ._-+/@:,= (it goes on #SBATCH lines)",
                    shown(chdir_to));

    /* the merge's command line, quoted once for the shell that runs it */
    char line[8192];
    FILE *m = fmemopen(line, sizeof line, "w");
    if (!m) return fail(1, "out of memory");
    fprintf(m, "exec ");
    shq(m, cmd[0]);
    fprintf(m, " merge ");
    shq(m, db);
    fputc(' ', m);
    shq(m, base);
    fprintf(m, ".shard-*-of-%d.db", shards);
    int full = ftell(m) >= (long)sizeof line - 1;
    fclose(m);
    if (full) return fail(2, "the command's program path is too long");

    /* the plugins for the shards' KVBENCH_PLUGINS, which is split at ':': a path holding
     * one would reach the shards as two wrong paths */
    char plugins[8192] = "", abs[PATH_MAX];
    for (int i = 0, k = 0; i < kv_plugin_count(); i++) {
        const char *path = realpath(kv_plugin_path(i), abs) ? abs : kv_plugin_path(i);
        if (strchr(path, ':'))
            return fail(2, "--plugin '%s': the path contains ':', which separates the plugins in the shards' "
                           "KVBENCH_PLUGINS; move or copy it to a path without ':'", shown(path));
        k += snprintf(plugins + k, sizeof plugins - (size_t)k, "%s%s", i ? ":" : "", path);
        if (k >= (int)sizeof plugins) return fail(2, "--plugin: the plugins' paths are too long together for KVBENCH_PLUGINS");
    }

    FILE *f = out ? fopen(out, "w") : stdout;
    if (!f) return fail(1, "--out '%s': %s", shown(out), strerror(errno));
    fprintf(f, "#!/bin/bash\n# Written by kvbench slurm-script: this command in %d shards, one SLURM array task each,\n"
               "# then a merge job that waits for all of them:\n#  ", shards);
    for (int i = 0; i < n_cmd; i++) {
        fputc(' ', f);
        shq(f, cmd[i]);
    }
    fprintf(f, "\n#\n"
               "#   bash THIS_FILE                 submits the array and the merge job\n"
               "#   sbatch THIS_FILE               submits the array only\n"
               "#   sbatch --array=2,5 THIS_FILE   runs shards 2 and 5 again (each resumes its own file)\n"
               "#   ");
    shq(f, cmd[0]);
    fprintf(f, " merge ");
    shq(f, db);
    fprintf(f, " %s.shard-*-of-%d.db   merges by hand\n", base, shards);
    fprintf(f, "#SBATCH --job-name=kvbench-%s\n#SBATCH --chdir=%s\n", stem, chdir_to);
    if (max_running) fprintf(f, "#SBATCH --array=0-%d%%%d\n", shards - 1, max_running);
    else fprintf(f, "#SBATCH --array=0-%d\n", shards - 1);
    fprintf(f, "#SBATCH --requeue\n#SBATCH --open-mode=append\n#SBATCH --output=%s.shard-%%a-of-%d.log\n", base, shards);
    if (cuda) fprintf(f, "#SBATCH --gres=gpu:1\n");
    if (cpus) fprintf(f, "#SBATCH --cpus-per-task=%d\n", cpus);
    for (int k = 0; k < 4; k++)
        if (vals[k]) fprintf(f, "#SBATCH %s=%s\n", names[k], vals[k]);
    for (int k = 0; k < n_extra; k++) fprintf(f, "#SBATCH %s\n", extra[k]);
    fprintf(f, "set -euo pipefail\nself=$(readlink -f \"$0\")\ncd ");
    shq(f, chdir_to);
    if (kv_plugin_count()) {   /* the shards load the plugins this command loaded (--plugin was taken out) */
        fprintf(f, "\nexport KVBENCH_PLUGINS=");
        shq(f, plugins);
    }
    /* N is written here, not read from $SLURM_ARRAY_TASK_COUNT, which is the size of the
     * submitted array: `sbatch --array=2,5` would otherwise change every shard's cases. */
    fprintf(f, "\nshards=%d\n", shards);
    fprintf(f, "if [ -z \"${SLURM_ARRAY_TASK_ID:-}\" ]; then\n"
               "    # not inside the array: submit it, and the merge that waits for all its tasks\n"
               "    array=$(sbatch --parsable \"$self\")\n"
               "    array=${array%%%%;*}\n"
               "    merge=$(sbatch --parsable --dependency=afterok:\"$array\" --kill-on-invalid-dep=yes \\\n"
               "        ");
    char opt[PATH_MAX + 64];
    snprintf(opt, sizeof opt, "--job-name=kvbench-%s-merge", stem);
    shq(f, opt);
    snprintf(opt, sizeof opt, "--output=%s.merge.log", base);
    fputc(' ', f);
    shq(f, opt);
    for (int k = 0; k < 4; k++)
        if (k != 2 && vals[k]) {
            snprintf(opt, sizeof opt, "%s=%s", names[k], vals[k]);
            fputc(' ', f);
            shq(f, opt);
        }
    fprintf(f, " --chdir=\"$PWD\" \\\n        --wrap=");
    shq(f, line);
    fprintf(f, ")\n"
               "    echo \"submitted array job $array ($shards shards) and merge job $merge (after all shards succeed)\"\n"
               "    exit 0\n"
               "fi\n"
               "k=$SLURM_ARRAY_TASK_ID\n"
               "echo \"kvbench shard $k/$shards on $(hostname), job ${SLURM_JOB_ID:-?}, restart ${SLURM_RESTART_COUNT:-0}\"\n"
               "exec");
    for (int i = 0; i < n_cmd; i++) {
        fputc(' ', f);
        if (i == db_at + 1 && !strcmp(cmd[db_at], "--db")) {
            shq(f, base);
            fprintf(f, ".shard-\"$k\"-of-\"$shards\".db");
        } else if (i == db_at && strcmp(cmd[i], "--db")) {
            fprintf(f, "--db=");
            shq(f, base);
            fprintf(f, ".shard-\"$k\"-of-\"$shards\".db");
        } else {
            shq(f, cmd[i]);
        }
    }
    fprintf(f, " --shard \"$k/$shards\"");
    if (cpus && !has_threads) fprintf(f, " --threads %d", cpus);
    fprintf(f, "\n");
    int bad = ferror(f);
    if (out) {
        bad |= fclose(f) != 0;
        if (!bad && chmod(out, 0755)) bad = 1;
    }
    if (bad) return fail(1, "--out '%s': write failed: %s", out ? shown(out) : "stdout", strerror(errno));
    if (out) fprintf(stderr, "kvbench slurm-script: wrote %s (%d shards); submit with: bash %s\n", out, shards, out);
    return 0;
}
