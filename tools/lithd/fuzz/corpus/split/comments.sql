 SELECT 1 -- a;b
; SELECT /* ; */ 2; /* open ;