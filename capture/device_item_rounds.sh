#!/usr/bin/env bash
# Captures, in one call to a lent GPU machine and one process, the .item() fix pair of
# capture/fix_pairs.py (infer_item, infer_no_item; with infer_launch_eager, train_item and
# train_no_item) profiled 4 times each, interleaved (the order reversed every other round), each
# capture followed by its step_us unprofiled (loops.step_time_us); and 3 interleaved unprofiled
# rounds of every loop before any profiler ran and 3 after: whether a loop's traced CPU pace, and the
# replayed saving of its fix, hold from one capture to the next (tests/data/h200/item_rounds).
# Usage (repo root, OUT set): bash capture/device_item_rounds.sh
# Writes $OUT/t.csv (the timings) and $OUT/x.tar (the traces, x/<loop>_<round>.json.gz).
python3 -m pip install -q --no-build-isolation --no-deps --no-index --target /tmp/site . >/dev/null 2>&1; export PYTHONPATH=/tmp/site PYTHONUNBUFFERED=1; cd /tmp; mkdir -p x; python3 - <<'E' 2>&1 | grep -v USDT
import torch,gzip,shutil,os
from tracekit.capture import fix_pairs as F, loops as L
out=os.environ['OUT']
N=['infer_item','infer_no_item','infer_launch_eager','train_item','train_no_item']
cpu=lambda:open('/proc/self/stat').read().split()[38]
S={n:F.PAIRS[n][2]('cuda') for n in N}
rows=[]
def t(tag):
  for n,s in S.items(): rows.append((tag,n,round(L.step_time_us(s,'cuda'),1)))
for r in range(3): t(f'pre{r}')
for r in range(4):
  for n in (N if r%2==0 else N[::-1]):
    p=f'/tmp/x/{n}_{r}.json'; rows.append(('cpu',n,cpu())); L.profile_scheduled(S[n],'cuda',p)
    c=cpu();rows.append((f'truth{r}',n,round(L.step_time_us(S[n],'cuda'),1),c,cpu()))
    with open(p,'rb') as a, gzip.open(p+'.gz','wb') as b: shutil.copyfileobj(a,b)
    os.remove(p)
for r in range(3): t(f'post{r}')
open(out+'/t.csv','w').write('\n'.join(','.join(map(str,x)) for x in rows)+'\n')
print(open(out+'/t.csv').read())
E
tar cf $OUT/x.tar -C /tmp x; nproc; lscpu | grep -i -E "model name|mhz|numa|thread"
