/* Official accuracy metrics of the text benchmarks, one prediction against one reference.
 * Each follows the benchmark's own scoring script (LongBench metrics.py, InfiniteBench
 * compute_scores.py, RULER evaluate, SQuAD); the differences are noted per function.
 * Text is UTF-8, read the way the Python scripts read it (pystr.h): str.lower(), split(),
 * strip(), re's \b and \d are Unicode-aware; string.punctuation and the [0-9] of
 * InfiniteBench's first_int_match are ASCII, in the scripts too (docs/metrics-unicode.md). */
#ifndef KV_METRICS_H
#define KV_METRICS_H
#include <stddef.h>

/* SQuAD normalisation: str.lower(), drop ASCII punctuation (string.punctuation), replace
 * the words a/an/the with a space (re's Unicode \b), " ".join(s.split()). Caller frees;
 * NULL on OOM. */
char *metric_normalize_answer(const char *s);
/* Token F1 of the normalised texts (multiset overlap), in [0,1]; 0 if either is empty. */
double metric_qa_f1(const char *pred, const char *ref);

/* Longest common subsequence length of two token sequences (tokens compared as strings). */
int metric_lcs(const char *const *a, int n, const char *const *b, int m);
/* LongBench's ROUGE-L (rouge.c): pltrdy `rouge` 1.0.1, get_scores(pred, ref)["rouge-l"]["f"].
 * Sentences are split at '.', whitespace collapsed, words split at ' ' (a blank sentence is
 * one empty word); summary-level union LCS with words counted as sets: LCS_u = |union of
 * the words of one LCS per (ref sentence, pred sentence) pair|, R = LCS_u / |words of ref|,
 * P = LCS_u / |words of pred|, F = 2PR/(P+R+1e-8). Case-sensitive, punctuation kept. 0 when
 * either text has no sentence (the package raises; LongBench catches it as 0). One
 * difference: the package's recursive backtrack raises RecursionError (LongBench: 0) on a
 * sentence pair longer than about 1000 words together; this computes the value. */
double metric_rouge_l(const char *pred, const char *ref);
/* InfiniteBench En.Sum (rouge.c): `rouge-score` 0.1.2 rougeLsum F as HF `evaluate` computes
 * it (no stemmer). Sentences are the non-empty lines; tokens are the [a-z0-9] runs of the
 * lowercased text; summary-level union LCS per reference line with token counts, so a
 * token is matched at most as often as it occurs on both sides. 0 if either has no token. */
double metric_rouge_lsum(const char *pred, const char *ref);

/* LongBench classification: the classes named in pred (substring), minus those that are
 * substrings of (but not equal to) the reference, removed as the official loop does
 * (it removes while iterating, so a class right after a removed one is kept); score
 * 1/len if the reference is among them, else 0. */
double metric_classification(const char *pred, const char *ref, const char *const *classes, int n);
/* LongBench passage_retrieval_en: share of the numbers (re's \d+, any Unicode decimal
 * digits) in pred that equal the N of "Paragraph N" in ref as strings (0 if pred has no
 * number or ref has no "Paragraph N"). */
double metric_retrieval(const char *pred, const char *ref);
/* LongBench passage_count: share of the numbers in pred equal to ref. */
double metric_count(const char *pred, const char *ref);

/* difflib.SequenceMatcher(None, a, b).ratio() on Unicode code points: 2*M/T with M the
 * size of the matching blocks (longest match first, then recursively left and right;
 * difflib's autojunk rule for len(b) >= 200 included); 1 if both are empty. */
double metric_seq_ratio(const char *a, const char *b);
/* LongBench code_sim: the first line of pred (after leading newlines) without ` # or //,
 * compared with ref by round(100 * ratio) / 100. The official script uses fuzzywuzzy's
 * fuzz.ratio, which is this ratio (difflib) when python-Levenshtein is absent; with it
 * installed fuzzywuzzy uses an edit-distance ratio, so results can differ slightly. */
double metric_code_sim(const char *pred, const char *ref);

/* 1 if needle.lower() occurs in hay.lower() (Python's full lowercase, final sigma included). */
int metric_contains_ci(const char *hay, const char *needle);
/* RULER string_match_all: 100 * (references found) / n. */
double metric_match_all(const char *pred, const char *const *refs, int n);
/* RULER string_match_part: 100 if any reference is found, else 0. */
double metric_match_part(const char *pred, const char *const *refs, int n);

/* InfiniteBench: the first run of ASCII digits in pred equals ref. */
int metric_first_int(const char *pred, const char *ref);
/* InfiniteBench Retrieve.KV: ref is one of pred's words (str.split(): Unicode whitespace)
 * after \n : " ' . , ? ! { } become spaces. */
int metric_kv_word(const char *pred, const char *ref);
/* InfiniteBench En.MC (longbook_choice_eng): first letter, answer prefixes, then the
 * first standalone A-D word, as the official get_score_one_longbook_choice_eng. */
int metric_choice(const char *pred, const char *option_text, const char *letter);
/* InfiniteBench Code.Debug (get_score_one_code_debug, current version: strips pred first). */
int metric_code_debug(const char *pred, const char *fn_name, const char *letter);

/* GSM8K answer normalisation: the output is cut at the first "Question:" (a hallucinated
 * next shot); the answer is the last number in what is left, commas removed, a trailing
 * '.' dropped. Writes it to out (NUL-terminated); returns its length, 0 if none. */
int metric_gsm8k_extract(const char *pred, char *out, size_t cap);
/* The reference of a GSM8K answer text: the number after "####", commas removed. */
int metric_gsm8k_reference(const char *answer, char *out, size_t cap);
/* 1 if the extracted answer equals ref as a number (so "18.00" equals "18"). */
int metric_gsm8k_match(const char *pred, const char *ref);

/* The first line of s after leading newlines, as LongBench scores trec/triviaqa/samsum/lsht.
 * Caller frees; NULL on OOM. */
char *metric_first_line(const char *s);
#endif
