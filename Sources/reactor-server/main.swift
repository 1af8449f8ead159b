print("reactor-server")
