H

systemYou are brief.
,
user$Hello! <|im_end|>
<|im_start|>system2
