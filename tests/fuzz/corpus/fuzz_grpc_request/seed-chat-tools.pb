z

userWeather in Paris?][{"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object"}}}]