module github.com/MrVSiK/gotry

go 1.25
