#!/usr/bin/env python3
"""Checks the Markdown files of the repository: every relative link's target exists, and
every #anchor names a heading of its file (GitHub's slugs). No link may leave the
repository. Usage: scripts/check-doc-links.py [ROOT]"""
import os
import re
import sys

root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else
                       os.path.join(os.path.dirname(__file__), '..'))
link = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')


def slugs(path):
    out, seen, fence = set(), {}, False
    for line in open(path, encoding='utf-8'):
        if line.startswith('```'):
            fence = not fence
        if fence or not line.startswith('#'):
            continue
        text = line.lstrip('#').strip().lower()
        text = re.sub(r'[^\w\- ]', '', text).replace(' ', '-')
        n = seen.get(text, 0)
        seen[text] = n + 1
        out.add(text if n == 0 else f'{text}-{n}')
    return out


bad = 0
for dirpath, dirnames, files in os.walk(root):
    dirnames[:] = [d for d in dirnames if not d.startswith(('.', 'build'))]
    for name in files:
        if not name.endswith('.md'):
            continue
        path = os.path.join(dirpath, name)
        fence = False
        for number, line in enumerate(open(path, encoding='utf-8'), 1):
            if line.startswith('```'):
                fence = not fence
            if fence:
                continue
            for target in link.findall(line):
                if re.match(r'[a-z]+:', target):
                    continue
                file, _, anchor = target.partition('#')
                dest = os.path.normpath(os.path.join(dirpath, file)) if file else path
                where = f'{os.path.relpath(path, root)}:{number}: {target}'
                if not dest.startswith(root + os.sep):
                    print(f'{where}: leaves the repository')
                    bad += 1
                elif not os.path.exists(dest):
                    print(f'{where}: no such file')
                    bad += 1
                elif anchor and dest.endswith('.md') and anchor not in slugs(dest):
                    print(f'{where}: no such heading')
                    bad += 1
sys.exit(1 if bad else 0)
