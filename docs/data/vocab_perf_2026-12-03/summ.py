import json,glob,statistics,collections
res=collections.defaultdict(lambda: collections.defaultdict(list))
for f in glob.glob('*-*.json'):
    which=f.split('-')[0]
    d=json.load(open(f))
    for b in d['benchmarks']:
        if b.get('run_type','iteration')!='iteration': continue
        res[b['name']][which].append(b['cpu_time'])
for n in sorted(res):
    b=res[n]['base']; w=res[n]['new']
    print(f"{statistics.median(w)/statistics.median(b):.2f}  {n}  base {statistics.median(b):.4g} new {statistics.median(w):.4g} {b[0] and d['benchmarks'][0]['time_unit']}")
for sc in ['zb-h1','1f1b']:
    for which in ['base','new']:
        t=[list(map(float,open(f).read().split()[-3:])) for f in glob.glob(f'{which}-*-scale-{sc}.time')]
        print(sc,which,'user med',statistics.median(x[0] for x in t),'sys',statistics.median(x[1] for x in t),'rss KB',statistics.median(x[2] for x in t))
