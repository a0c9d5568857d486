
gpt-4hi