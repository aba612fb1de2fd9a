/* RULER qa_1 (SQuAD) and qa_2 (HotpotQA) data, read as NVIDIA/RULER's
 * scripts/data/synthetic/qa.py reads them, from files the user supplies:
 *   DIR/squad.json     SQuAD 2.0 dev (dev-v2.0.json): data[].paragraphs[].{context, qas[]}
 *                      with question, answers[].text, is_impossible (absent: answerable,
 *                      so SQuAD 1.1 files work too)
 *   DIR/hotpotqa.json  HotpotQA dev, distractor setting (hotpot_dev_distractor_v1.json):
 *                      [].{question, answer, context: [[title, [sentence, ...]], ...]}
 * Documents: the distinct paragraphs (SQuAD) or "title\n" + the joined sentences
 * (HotpotQA), sorted. Each question keeps its gold documents and, for SQuAD, the other
 * paragraphs of its article ("more_context"), the first distractors RULER adds. */
#ifndef KV_RULER_QA_H
#define KV_RULER_QA_H
#include <stddef.h>

typedef struct {
    char *query;
    char **answers;
    int n_answers;
    int *gold, n_gold;          /* document indices */
    int *more, n_more;          /* SQuAD: the article's other paragraphs */
} ruler_qa_item;

typedef struct ruler_qa_data {
    char **docs;                /* sorted, distinct */
    int n_docs;
    ruler_qa_item *qa;          /* in file order (RULER takes sample i = question i) */
    int n_qa;
    char path[1024];
} ruler_qa_data;

/* Reads DIR/squad.json (squad = 1) or DIR/hotpotqa.json. NULL with "PATH: reason" in err
 * (missing file named with where it comes from). */
ruler_qa_data *ruler_qa_load(const char *dir, int squad, char *err, size_t errlen);
void ruler_qa_free(ruler_qa_data *d);
/* The file name a qa task reads ("squad.json" / "hotpotqa.json"). */
const char *ruler_qa_file(int squad);
#endif
